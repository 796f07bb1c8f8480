public import Foundation
public import PushFleetCore
import ServiceLifecycle
import Synchronization

/// Hands one native push to a platform push service and says how it answered.
public protocol PushDelivery: Sendable {
    func deliver(_ push: NativePush) async -> DeliveryAnswer
    /// The hub took a send (before its fan-out), for a run watching where its pushes go.
    func took(_ note: HubNote)
}

extension PushDelivery {
    public func took(_ note: HubNote) {}
}

/// A push as the hub sends it to APNs, FCM v1 or WNS: the device's handle, the provider
/// headers and the provider body (for FCM, the whole `{"message":…}` with the token in it).
public struct NativePush: Sendable, Equatable {
    public var platform: HubPlatform
    public var handle: String
    public var headers: [HubRegistration.Header]
    public var body: String
    /// When the hub took the send this push is part of.
    public var hubAt: Int64? = nil
    /// A browser push's body: the payload encrypted for the subscription (`body` is then empty).
    public var payload: Data? = nil
}

public enum DeliveryAnswer: Sendable, Equatable {
    case accepted
    /// The push service says the handle is dead (APNs 410 `Unregistered`, FCM 404 `UNREGISTERED`,
    /// WNS 404/410): the registration goes.
    case handleExpired
    /// Throttled (APNs/FCM 429, WNS 406): retried.
    case throttled
    case failed(String)
}

/// One notification hub: its settings, its registrations and its fan-out to the push services.
public final class NotificationHub: Sendable {
    /// Counters since start.
    public struct Stats: Sendable, Equatable, Codable {
        public var sends = 0
        public var pushes = 0
        public var accepted = 0
        public var failed = 0
        public var retried = 0
        public var removedRegistrations = 0
    }

    /// What a send did, once every push was handed over.
    public struct SendReport: Sendable, Equatable {
        public var notificationID: String
        public var targets = 0
        public var accepted = 0
        public var failed = 0
        public var removed = 0
    }

    public let settings: Settings
    public let store: HubStore
    let tokens = SharedAccessSignature.VerifiedCache()
    let delivery: any PushDelivery
    let now: @Sendable () -> Int64
    /// Where the hub records its spans (a server span per send, a client span per push attempt);
    /// nil: none recorded, and each push hands on the send's context as it came.
    let spans: SpanRecorder?
    private let counters = Mutex(Stats())
    private let sequence = Atomic<UInt64>(0)

    /// - Parameters:
    ///   - delivery: where pushes go (the mock push service's provider endpoints, in process).
    ///   - now: wall clock in nanoseconds since the epoch; tests pass their own.
    ///   - spans: where its spans are recorded, under a sampled caller's.
    public init(
        settings: Settings, delivery: any PushDelivery, now: @escaping @Sendable () -> Int64 = WallClock.nanoseconds, spans: SpanRecorder? = nil
    ) {
        self.settings = settings
        self.spans = spans
        self.store = HubStore(limits: settings.limits, registrationTTL: settings.registrationTTL)
        self.delivery = delivery
        self.now = now
    }

    public func stats() -> Stats { counters.withLock { $0 } }

    // MARK: Sends

    /// A `POST …/messages` as the endpoint parsed it.
    public struct SendRequest: Sendable {
        public var format: String
        /// `ServiceBusNotification-Tags`; nil broadcasts.
        public var tags: String?
        /// `ServiceBusNotification-DeviceHandle` of a direct send.
        public var directHandle: String?
        public var body: Data
        /// Every request header, for the provider headers that pass through (apns-*, X-WNS-*).
        public var headers: [HubRegistration.Header]

        public init(format: String, tags: String? = nil, directHandle: String? = nil, body: Data, headers: [HubRegistration.Header] = []) {
            self.format = format
            self.tags = tags
            self.directHandle = directHandle
            self.body = body
            self.headers = headers
        }
    }

    public enum SendFailure: Error, Equatable, CustomStringConvertible {
        /// 400: malformed headers or body.
        case badRequest(String)
        /// 403: the message is too large for its push service.
        case tooLarge(String)
        /// 503: the process is stopping; the send's remaining pushes were not handed over.
        case unavailable(String)

        public var description: String {
            switch self {
            case .badRequest(let why), .tooLarge(let why), .unavailable(let why): why
            }
        }

        /// The HTTP status the service answers it with.
        public var statusCode: Int {
            switch self {
            case .badRequest: 400
            case .tooLarge: 403
            case .unavailable: 503
            }
        }
    }

    /// Validates a send, fans it out to every registration it selects and acts on the push
    /// services' answers. Returns once every push was handed over (the service answers when it
    /// has queued the send; see docs/notification-hubs.md). At a graceful shutdown the fan-out
    /// stops handing over and retrying at once, and the send fails as unavailable: stopping
    /// waits for the pushes in flight, not for the whole send.
    public func send(_ request: SendRequest) async -> Result<SendReport, SendFailure> {
        let plan: SendPlan
        switch SendPlan.make(request, settings: settings) {
        case .success(let made): plan = made
        case .failure(let failure): return .failure(failure)
        }
        guard let spans, let trace = plan.trace, TraceIdentity.sampled(trace), let caller = TraceIdentity(traceparent: trace) else {
            return await send(plan, request: request, span: nil)
        }
        let span = caller.child(spans.nextSalt())
        let start = UInt64(clamping: WallClock.nanoseconds())
        let result = await send(plan, request: request, span: span)
        var attributes: [(String, TraceSpan.Value)] = [
            ("http.request.method", .string("POST")), ("url.path", .string("/\(settings.hubName)/messages")),
            ("pushfleet.hub.format", .string(request.format)),
        ]
        var status = TraceSpan.Status.unset
        switch result {
        case .success(let report):
            attributes += [
                ("http.response.status_code", .int(201)), ("pushfleet.hub.targets", .int(Int64(report.targets))),
                ("pushfleet.hub.accepted", .int(Int64(report.accepted))), ("pushfleet.hub.failed", .int(Int64(report.failed))),
            ]
        case .failure(let failure):
            attributes.append(("http.response.status_code", .int(Int64(failure.statusCode))))
            if failure.statusCode >= 500 { status = .error(failure.description) }
        }
        spans.record(
            TraceSpan(
                identity: span, parent: caller.span, name: "POST", kind: .server, start: start, end: UInt64(clamping: WallClock.nanoseconds()),
                attributes: attributes, status: status
            )
        )
        return result
    }

    /// `span`: the send's server span when recording, the parent of each push's client span.
    private func send(_ plan: SendPlan, request: SendRequest, span: TraceIdentity?) async -> Result<SendReport, SendFailure> {
        let instant = now()
        let targets: [Target]
        if let handle = request.directHandle {
            guard let platform = plan.platform else { return .failure(.badRequest("a direct send needs a native format, not template")) }
            targets = [Target(platform: platform, handle: HubRegistration.normalizedHandle(handle, platform: platform), registration: nil)]
        } else {
            let start = UInt64(clamping: WallClock.nanoseconds())
            targets = store.targets(platform: plan.platform, expression: plan.expression, now: instant).map {
                Target(platform: $0.platform, handle: $0.handle, registration: $0)
            }
            // The registrations' look-up, as the backend's store calls are recorded.
            if let spans, let span {
                spans.record(
                    TraceSpan(
                        identity: span.child(spans.nextSalt()), parent: span.span, name: "store read", kind: .internal, start: start,
                        end: UInt64(clamping: WallClock.nanoseconds()),
                        attributes: [("db.system.name", .string("memory")), ("pushfleet.hub.targets", .int(Int64(targets.count)))]
                    )
                )
            }
        }
        var report = SendReport(notificationID: notificationID(instant), targets: targets.count)
        delivery.took(HubNote(at: instant, body: String(decoding: request.body, as: UTF8.self), format: request.format, targets: targets.count))
        let answers = await cancelWhenGracefulShutdown { await self.fanOut(targets, plan: plan, at: instant, span: span) }
        var expired = Set<Target.HandleKey>()
        for (target, answer) in answers {
            switch answer {
            case .accepted: report.accepted += 1
            case .handleExpired:
                report.failed += 1
                if target.registration != nil, expired.insert(target.handleKey).inserted {
                    report.removed += store.removeExpiredHandle(target.handle, platform: target.platform)
                }
            case .throttled, .failed: report.failed += 1
            }
        }
        counters.withLock {
            $0.sends += 1
            $0.pushes += answers.count
            $0.accepted += report.accepted
            $0.failed += report.failed
            $0.removedRegistrations += report.removed
        }
        guard answers.count == targets.count else {
            return .failure(.unavailable("the hub is stopping: \(targets.count - answers.count) of \(targets.count) pushes were not sent"))
        }
        return .success(report)
    }

    struct Target: Sendable {
        var platform: HubPlatform
        var handle: String
        var registration: HubRegistration?

        struct HandleKey: Hashable {
            var platform: HubPlatform
            var handle: String
        }

        var handleKey: HandleKey { HandleKey(platform: platform, handle: HubRegistration.handleKey(handle, platform: platform)) }
    }

    /// At most `fanOutConcurrency` pushes in flight; each retried while throttled. Once the
    /// task is cancelled no push starts, and the answers are fewer than the targets.
    private func fanOut(_ targets: [Target], plan: SendPlan, at instant: Int64, span: TraceIdentity?) async -> [(Target, DeliveryAnswer)] {
        let window = max(1, settings.fanOutConcurrency)
        return await withTaskGroup(of: (Target, DeliveryAnswer).self) { group in
            var results: [(Target, DeliveryAnswer)] = []
            results.reserveCapacity(targets.count)
            var next = 0
            while next < targets.count || !group.isEmpty {
                while next < targets.count, next - results.count < window, !Task.isCancelled {
                    let target = targets[next]
                    next += 1
                    group.addTask { (target, await self.push(plan, to: target, at: instant, span: span)) }
                }
                guard let result = await group.next() else { break }
                results.append(result)
            }
            return results
        }
    }

    private func push(_ plan: SendPlan, to target: Target, at instant: Int64, span: TraceIdentity?) async -> DeliveryAnswer {
        var native: NativePush
        switch plan.native(for: target.registration, platform: target.platform, handle: target.handle, settings: settings) {
        case .success(let push): native = push
        case .failure(let why): return .failed(why.reason)
        }
        native.hubAt = instant
        if let trace = plan.trace { native.headers.append(.init("traceparent", trace)) }
        var backoff: Backoff?
        var answer = DeliveryAnswer.failed("no attempt")
        for attempt in 0..<max(1, settings.maxAttempts) {
            if attempt > 0 {
                if backoff == nil {
                    // Waits grow to 2 s, or to a longer base, which would otherwise be cut to 2 s.
                    let cap = max(.seconds(2), settings.backoff)
                    backoff = Backoff(base: settings.backoff, cap: cap, seed: UInt64.random(in: 0...UInt64.max))
                }
                try? await Task.sleep(for: .nanoseconds(backoff!.next()))
                // Stopping: the push keeps its last answer rather than another attempt.
                guard !Task.isCancelled else { return answer }
                counters.withLock { $0.retried += 1 }
            }
            answer = await deliver(native, under: span)
            guard answer == .throttled else { return answer }
        }
        return answer
    }

    /// One attempt; when recording, in a client span of its own under the send's, whose id the
    /// push's `traceparent` carries, as an instrumented HTTP client's request does.
    private func deliver(_ push: NativePush, under span: TraceIdentity?) async -> DeliveryAnswer {
        guard let spans, let span else { return await delivery.deliver(push) }
        var push = push
        let client = span.child(spans.nextSalt())
        push.headers.removeAll { $0.name == "traceparent" }
        push.headers.append(.init("traceparent", client.traceparent))
        let start = UInt64(clamping: WallClock.nanoseconds())
        let answer = await delivery.deliver(push)
        var attributes: [(String, TraceSpan.Value)] = [("http.request.method", .string("POST")), ("pushfleet.platform", .string(push.platform.rawValue))]
        let status: TraceSpan.Status
        switch answer {
        case .accepted: status = .unset
        case .handleExpired:
            attributes.append(("error.type", .string("unregistered")))
            status = .error("the push service says the handle is dead")
        case .throttled:
            attributes.append(("error.type", .string("throttled")))
            status = .error("throttled")
        case .failed(let why):
            attributes.append(("error.type", .string("failed")))
            status = .error(String(why.prefix(200)))
        }
        spans.record(
            TraceSpan(
                identity: client, parent: span.span, name: "POST", kind: .client, start: start, end: UInt64(clamping: WallClock.nanoseconds()),
                attributes: attributes, status: status
            )
        )
        return answer
    }

    /// `{32 hex}-{yyyyMMddHHmmss}-{sequence}-1`, the shape of the service's notification ids.
    private func notificationID(_ instant: Int64) -> String {
        let hex = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let stamp = UTCStamp.compact(seconds: instant / 1_000_000_000)
        return "\(hex)-\(stamp)-\(sequence.add(1, ordering: .relaxed).newValue)-1"
    }
}
