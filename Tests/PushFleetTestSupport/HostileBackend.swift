import Foundation
package import Hummingbird
import HTTPTypes
package import Logging
import NIOCore
import NIOHTTP1
import PushFleetCore
package import PushFleetServerSupport
import PushFleetWire
package import ServiceLifecycle
import Synchronization

/// A backend written apart from the reference one, speaking the seed's contract and pushing
/// straight to the mock push service, that misbehaves on purpose in one way at a time and
/// counts exactly what it did wrong: the ground truth the runner's counts must equal.
package final class HostileBackend: Sendable {
    package enum Behaviour: Sendable, CustomStringConvertible {
        /// Honest in every way.
        case correct
        /// Also pushes some secure ids to another user's device; answers that user's fetch with
        /// this status (nil: never answers within the fetch timeout; 200: serves it, a leak).
        case foreignRead(status: Int?)
        /// Keeps pushing to tokens the push service declared dead (or, honouring, drops them).
        case unregistered(honour: Bool)
        /// Also pushes, to some recipients, bodies it pushed in an earlier run.
        case replay
        /// Serves its own image for every rich content.
        case ownRichImage
        /// Pushes some plain sends to another user's device, twice.
        case misdeliverTwice
        /// Delays every push and fetch; some delayed pushes go to another user's device.
        case slow
        /// Answers some plain sends without pushing; pushes some others twice.
        case dropAndDuplicate
        /// Fails every send after the first few (500), as a backend that died mid-run.
        case failsAfter(sends: Int)
        /// Refuses every second user's registration with 401.
        case refusesRegistration
        /// Pushes with credentials the push service does not accept, and answers every send 200.
        case wrongCredentials
        /// Encrypts some Web Push messages for keys that are not the subscription's.
        case foreignWebPushKeys

        package var description: String {
            switch self {
            case .correct: "correct"
            case .foreignRead(let status): "foreign read \(status.map(String.init) ?? "hangs")"
            case .unregistered(let honour): honour ? "honours Unregistered" : "ignores Unregistered"
            case .replay: "replays old pushes"
            case .ownRichImage: "serves its own rich image"
            case .misdeliverTwice: "misdelivers twice"
            case .slow: "slow"
            case .dropAndDuplicate: "drops and duplicates"
            case .failsAfter(let sends): "fails after \(sends) sends"
            case .refusesRegistration: "refuses registrations"
            case .wrongCredentials: "wrong push credentials"
            case .foreignWebPushKeys: "encrypts Web Push for other keys"
            }
        }
    }

    /// What the backend did, push by push.
    package struct Tally: Sendable, Equatable, CustomStringConvertible {
        package var misdelivered = 0
        package var duplicated = 0
        package var dropped = 0
        package var replayed = 0
        package var unregistered = 0
        package var sentToDeadToken = 0
        package var foreignReadsServed = 0
        /// Web Push messages encrypted for keys that are not the subscription's.
        package var undecryptable = 0
        /// Pushes the push service refused, by `platform status` (`apns 403`).
        package var refused: [String: Int] = [:]

        package init() {}

        package var description: String {
            "misdelivered \(misdelivered), duplicated \(duplicated), dropped \(dropped), replayed \(replayed), unregistered \(unregistered), sent to dead token \(sentToDeadToken), foreign reads served \(foreignReadsServed), undecryptable \(undecryptable)"
        }
    }

    private struct Registration {
        var user: String
        var platform: Platform?
        var handle: String
    }

    private struct Stored {
        var recipient: String
        var payload: String?
        var image: Data?
    }

    private struct State {
        var registrations: [String: Registration] = [:]
        var notifications: [String: Stored] = [:]
        var rng: SplitMix64
        var tally = Tally()
        /// Per dead handle: when the backend answered the send in which it first met the 410.
        var knownDead: [String: Int64] = [:]
        /// Bodies pushed, by platform, kept across runs for replays.
        var pastBodies: [Platform: [String]] = [:]
        var replayFrom: [Platform: [String]] = [:]
        var nextID = 0
        var sends = 0
    }

    package let behaviour: Behaviour
    package var pushService: String { sender.pushService }
    private let sender: TestPushSender
    package let bound = Readiness<ListenAddress>()
    private let state: Mutex<State>
    private let pushDelay: ClosedRange<Int> = 250...650

    package init(behaviour: Behaviour, pushService: String, seed: UInt64) {
        self.behaviour = behaviour
        if case .wrongCredentials = behaviour {
            self.sender = TestPushSender(pushService: pushService, wrongCredentials: true)
        } else {
            self.sender = TestPushSender(pushService: pushService)
        }
        self.state = Mutex(State(rng: SplitMix64(seed: seed)))
    }

    package var tally: Tally {
        var tally = state.withLock { $0.tally }
        tally.refused = sender.refused
        return tally
    }

    package func shutdown() async {
        await sender.shutdown()
    }

    /// Starts a new run: the bodies pushed so far become the ones a replay sends; the earlier
    /// run's devices are forgotten (they are offline for good, and would only hold pushes).
    package func nextRun() {
        state.withLock { state in
            state.replayFrom = state.pastBodies
            state.tally = Tally()
            sender.resetCounts()
            state.registrations = [:]
        }
    }

    private func chance(_ p: Double) -> Bool { state.withLock { $0.rng.nextUnit() < p } }

    /// Sends to one user one at a time (in the Unregistered behaviours), so that "after the
    /// backend was told" is the same instant by its clock and by the runner's.
    private let userLocks = UserLocks()

    private var serialises: Bool {
        if case .unregistered = behaviour { return true }
        return false
    }

    // MARK: Server

    package func makeService(logger: Logger) -> any Service {
        let router = Router()
        router.post("/api/register") { request, _ in try self.createRegistration(request) }
        router.get("/api/webpush/vapid") { _, _ in self.json(["publicKey": self.sender.applicationServerKey]) }
        router.put("/api/register/:id") { request, context in try await self.updateRegistration(request, id: context.parameters.get("id") ?? "") }
        router.delete("/api/register/:id") { request, context in
            let user = try Self.user(request)
            let id = context.parameters.get("id") ?? ""
            self.state.withLock { state in
                if state.registrations[id]?.user == user { state.registrations[id] = nil }
            }
            return Response(status: .ok)
        }
        router.post("/api/notifications") { request, _ in try await self.sendPlain(request) }
        router.post("/api/notifications/secure") { request, _ in try await self.sendStored(request, rich: false) }
        router.post("/api/notifications/rich") { request, _ in try await self.sendStored(request, rich: true) }
        router.get("/api/notifications/:id") { request, context in try await self.fetch(request, id: context.parameters.get("id") ?? "") }
        let bound = self.bound
        return Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "hostile"),
            onServerRunning: { bound.succeed(ListenAddress(host: "127.0.0.1", port: $0.localAddress?.port ?? 0)) }, logger: logger
        )
    }

    package static func user(_ request: Request) throws -> String {
        guard let header = request.headers[.authorization], header.hasPrefix("Basic "),
            let decoded = Data(base64Encoded: String(header.dropFirst(6))).map({ String(decoding: $0, as: UTF8.self) }),
            let colon = decoded.firstIndex(of: ":"), decoded[..<colon] == decoded[decoded.index(after: colon)...]
        else { throw HTTPError(.unauthorized) }
        return String(decoded[..<colon])
    }

    private func json(_ value: some Encodable) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: (try? JSONEncoder().encode(value)) ?? Data()))
        )
    }

    private func newID() -> String {
        state.withLock { state in
            state.nextID += 1
            return "h\(state.nextID)"
        }
    }

    private func createRegistration(_ request: Request) throws -> Response {
        let user = try Self.user(request)
        let id = newID()
        let handle = request.uri.queryParameters["handle"].map(String.init) ?? ""
        state.withLock { $0.registrations[id] = Registration(user: user, platform: nil, handle: handle) }
        return json(id)
    }

    private func updateRegistration(_ request: Request, id: String) async throws -> Response {
        let user = try Self.user(request)
        if case .refusesRegistration = behaviour, (Int(user.dropFirst(4)) ?? 0) % 2 == 0 { throw HTTPError(.unauthorized) }
        var request = request
        let body = try await request.collectBody(upTo: 64 * 1024)
        guard let registration = try? JSONDecoder().decode(DeviceRegistration.self, from: Data(body.readableBytesView)),
            let platform = Platform(name: registration.platform)
        else { throw HTTPError(.badRequest) }
        // Another user's tag is refused, as a leak probe expects of any backend.
        if (registration.tags ?? []).contains(where: { $0.hasPrefix("username:") && $0 != "username:\(user)" }) { throw HTTPError(.forbidden) }
        return try state.withLock { state in
            guard let current = state.registrations[id], current.user == user else { throw HTTPError(.gone) }
            state.registrations[id] = Registration(user: user, platform: platform, handle: registration.handle)
            return Response(status: .ok)
        }
    }

    private func devices(of user: String, platforms: [Platform]) -> [Registration] {
        state.withLock { state in
            state.registrations.values.filter { $0.user == user && $0.platform.map(platforms.contains) == true }.sorted { $0.handle < $1.handle }
        }
    }

    /// One device of another user, if there is one.
    private func someoneElse(than user: String) -> Registration? {
        state.withLock { state in
            let others = state.registrations.values.filter { $0.user != user && $0.platform != nil }.sorted { $0.handle < $1.handle }
            return others.isEmpty ? nil : others[Int(state.rng.next() % UInt64(others.count))]
        }
    }

    // MARK: Sends

    private enum Body {
        case alert(String)
        case secure(String)
        case rich(id: String, message: String)
    }

    /// Counts a send; throws once a backend that "dies" has had its share.
    private func admitSend() throws {
        let count = state.withLock { state in
            state.sends += 1
            return state.sends
        }
        if case .failsAfter(let limit) = behaviour, count > limit { throw HTTPError(.internalServerError) }
    }

    private func sendPlain(_ request: Request) async throws -> Response {
        let arrived = MonotonicClock.nanoseconds()
        try admitSend()
        let sender = try Self.user(request)
        var request = request
        let query = request.uri.queryParameters
        guard let to = query["to_tag"].map(String.init), let platform = query["pns"].flatMap({ Platform(name: String($0)) }) else {
            throw HTTPError(.badRequest)
        }
        let message = try JSONDecoder().decode(String.self, from: Data(try await request.collectBody(upTo: 64 * 1024).readableBytesView))
        if serialises { await userLocks.acquire(to) }
        defer { if serialises { userLocks.release(to) } }
        let body = Body.alert("From \(sender): \(message)")
        let targets = devices(of: to, platforms: [platform])
        var copies = 1
        var stranger: Registration?
        switch behaviour {
        case .dropAndDuplicate:
            let roll = state.withLock { $0.rng.nextUnit() }
            if roll < 0.15 {
                state.withLock { $0.tally.dropped += targets.count }
                return json(["outcome": "Completed"])
            }
            if roll < 0.3 {
                copies = 2
                state.withLock { $0.tally.duplicated += targets.count }
            }
        case .misdeliverTwice where chance(0.2):
            stranger = someoneElse(than: to)
        case .slow where chance(0.2):
            stranger = someoneElse(than: to)
        default: break
        }
        let learnt = await deliver(body, to: targets, copies: copies, arrived: arrived)
        if let stranger {
            let twice = if case .misdeliverTwice = behaviour { true } else { false }
            _ = await deliver(body, to: [stranger], copies: twice ? 2 : 1, arrived: arrived)
            state.withLock {
                $0.tally.misdelivered += 1
                if twice { $0.tally.duplicated += 1 }
            }
        }
        if case .replay = behaviour, chance(0.3) {
            for target in targets {
                let old: String? = state.withLock { state in
                    guard let bodies = state.replayFrom[target.platform!], !bodies.isEmpty else { return nil }
                    return bodies[Int(state.rng.next() % UInt64(bodies.count))]
                }
                guard let old else { continue }
                if await push(raw: old, platform: target.platform!, handle: target.handle, pushType: Self.pushType(for: body, target.platform!)) {
                    state.withLock { $0.tally.replayed += 1 }
                }
            }
        }
        return answered(learnt)
    }

    /// Records when the backend had answered the sends during which it first met a dead token.
    private func answered(_ learnt: [String], id: String? = nil) -> Response {
        let now = MonotonicClock.nanoseconds()
        state.withLock { state in
            for handle in learnt where state.knownDead[handle] == nil { state.knownDead[handle] = now }
        }
        return id.map { json(["outcome": "Completed", "id": $0]) } ?? json(["outcome": "Completed"])
    }

    private func sendStored(_ request: Request, rich: Bool) async throws -> Response {
        let arrived = MonotonicClock.nanoseconds()
        try admitSend()
        let sender = try Self.user(request)
        var request = request
        guard let to = request.uri.queryParameters["to_tag"].map(String.init) else { throw HTTPError(.badRequest) }
        let data = Data(try await request.collectBody(upTo: 1 << 20).readableBytesView)
        if serialises { await userLocks.acquire(to) }
        defer { if serialises { userLocks.release(to) } }
        let id = newID()
        let body: Body
        if rich {
            let content = try JSONDecoder().decode(RichNotificationRequest.self, from: data)
            state.withLock { $0.notifications[id] = Stored(recipient: to, payload: nil, image: content.image.flatMap { Data(base64Encoded: $0) }) }
            body = .rich(id: id, message: content.message)
        } else {
            let payload = try JSONDecoder().decode(String.self, from: data)
            state.withLock { $0.notifications[id] = Stored(recipient: to, payload: payload, image: nil) }
            body = .secure(id)
        }
        _ = sender
        let targets = devices(of: to, platforms: Platform.pushable)
        let learnt = await deliver(body, to: targets, copies: 1, arrived: arrived)
        if case .foreignRead = behaviour, !rich, chance(0.4), let stranger = someoneElse(than: to) {
            _ = await deliver(body, to: [stranger], copies: 1, arrived: arrived)
            state.withLock { $0.tally.misdelivered += 1 }
        }
        if case .slow = behaviour, chance(0.2), let stranger = someoneElse(than: to) {
            _ = await deliver(body, to: [stranger], copies: 1, arrived: arrived)
            state.withLock { $0.tally.misdelivered += 1 }
        }
        return answered(learnt, id: id)
    }

    private func fetch(_ request: Request, id: String) async throws -> Response {
        let reader = try Self.user(request)
        if case .slow = behaviour { try await Task.sleep(for: .milliseconds(200)) }
        guard let stored = state.withLock({ $0.notifications[id] }) else { throw HTTPError(.notFound) }
        if stored.recipient != reader {
            guard case .foreignRead(let status) = behaviour else { throw HTTPError(.notFound) }
            guard let status else {
                try await Task.sleep(for: .seconds(6))
                throw HTTPError(.notFound)
            }
            guard status == 200 else { throw HTTPError(.init(code: status)) }
            state.withLock { $0.tally.foreignReadsServed += 1 }
        }
        if let payload = stored.payload {
            return json(SecureNotification(id: id, payload: payload, read: true))
        }
        let image: Data
        if case .ownRichImage = behaviour {
            image = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00])
        } else {
            image = stored.image ?? Data()
        }
        return Response(status: .ok, headers: [.contentType: "image/png"], body: .init(byteBuffer: ByteBuffer(bytes: image)))
    }

    // MARK: Pushing

    /// Pushes `copies` times to each target; returns the handles that met their first 410 now.
    private func deliver(_ body: Body, to targets: [Registration], copies: Int, arrived: Int64) async -> [String] {
        var learnt: [String] = []
        for target in targets {
            guard let platform = target.platform else { continue }
            let (raw, pushType) = Self.render(body, platform)
            if case .alert = body { state.withLock { $0.pastBodies[platform, default: []].append(raw) } }
            for _ in 0..<copies {
                if case .slow = behaviour {
                    let delay = state.withLock { state in Int(state.rng.next() % UInt64(pushDelay.count)) + pushDelay.lowerBound }
                    Task {
                        try? await Task.sleep(for: .milliseconds(delay))
                        _ = await self.push(raw: raw, platform: platform, handle: target.handle, pushType: pushType)
                    }
                    continue
                }
                let accepted: Bool
                if platform == .webpush, case .foreignWebPushKeys = behaviour, chance(0.3) {
                    state.withLock { $0.tally.undecryptable += 1 }
                    accepted = await sender.pushWebPush(raw: raw, subscription: target.handle, foreignKeys: true)
                } else {
                    accepted = await push(raw: raw, platform: platform, handle: target.handle, pushType: pushType)
                }
                if accepted { continue }
                // Refused as a dead token: the first time the backend could not know.
                let known = state.withLock { $0.knownDead[target.handle] }
                if let known, arrived > known {
                    state.withLock { $0.tally.sentToDeadToken += 1 }
                } else {
                    state.withLock { $0.tally.unregistered += 1 }
                    if known == nil { learnt.append(target.handle) }
                }
                if case .unregistered(honour: true) = behaviour {
                    state.withLock { state in
                        for (id, registration) in state.registrations where registration.handle == target.handle { state.registrations[id] = nil }
                    }
                    break
                }
            }
        }
        return learnt
    }

    private static func pushType(for body: Body, _ platform: Platform) -> String { render(body, platform).1 }

    private static func render(_ body: Body, _ platform: Platform) -> (String, String) {
        func object(_ value: [String: Any]) -> String {
            String(decoding: (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])) ?? Data(), as: UTF8.self)
        }
        switch (body, platform) {
        case (.alert(let text), .webpush): return (object(["message": text]), "webpush")
        case (.secure(let id), .webpush): return (object(["secureId": id]), "webpush")
        case (.rich(let id, let message), .webpush): return (object(["richId": id, "richMessage": message, "richType": "img"]), "webpush")
        case (.alert(let text), .apns): return (object(["aps": ["alert": text]]), "alert")
        case (.alert(let text), .fcm): return (object(["data": ["message": text]]), "data")
        case (.alert(let text), _):
            let escaped = text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            return ("<toast><visual><binding template=\"ToastText01\"><text id=\"1\">\(escaped)</text></binding></visual></toast>", "wns/toast")
        case (.secure(let id), .apns): return (object(["aps": ["content-available": 1], "secureId": id]), "background")
        case (.secure(let id), .fcm): return (object(["data": ["secureId": id]]), "data")
        case (.secure(let id), _): return (id, "wns/raw")
        case (.rich(let id, let message), .apns):
            return (object(["aps": ["content-available": 1], "richId": id, "richMessage": message, "richType": "img"]), "background")
        case (.rich(let id, let message), .fcm): return (object(["data": ["richId": id, "richMessage": message, "richType": "img"]]), "data")
        case (.rich(let id, let message), _): return (object(["richId": id, "richMessage": message, "richType": "img"]), "wns/raw")
        }
    }

    private func push(raw: String, platform: Platform, handle: String, pushType: String) async -> Bool {
        await sender.push(raw: raw, platform: platform, handle: handle, pushType: pushType)
    }
}

/// One holder at a time per key, first come first served.
private final class UserLocks: Sendable {
    private let state = Mutex<[String: [CheckedContinuation<Void, Never>]]>([:])

    func acquire(_ key: String) async {
        await withCheckedContinuation { continuation in
            let free = state.withLock { held -> Bool in
                guard held[key] != nil else {
                    held[key] = []
                    return true
                }
                held[key]!.append(continuation)
                return false
            }
            if free { continuation.resume() }
        }
    }

    func release(_ key: String) {
        let next = state.withLock { held -> CheckedContinuation<Void, Never>? in
            guard var waiting = held[key], !waiting.isEmpty else {
                held[key] = nil
                return nil
            }
            let first = waiting.removeFirst()
            held[key] = waiting
            return first
        }
        next?.resume()
    }
}
