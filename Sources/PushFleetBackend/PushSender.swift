import PushFleetWebPush
import Foundation
import NIOCore
import NIOHTTP1
import PushFleetClients
import PushFleetCore
import PushFleetWire

/// Sends native notifications to the push service in each platform's wire format through one
/// pooled transport (``ProviderTransport``), retrying throttled and transient failures with
/// exponential backoff.
struct PushSender: Sendable {
    struct Settings: Sendable {
        /// `apns-topic`: the app's bundle id.
        var apnsTopic: String
        /// The FCM project in `/v1/projects/{project}/messages:send`.
        var fcmProject: String
        /// Attempts per push, the first included.
        var maxAttempts: Int
        /// First backoff; doubled per retry, with jitter.
        var backoff: Duration
        var requestTimeout: Duration
    }

    enum Result: Equatable {
        case accepted
        /// The push service says the handle is dead: the registration must go.
        case unregistered
        case failed(reason: String)
    }

    let transport: ProviderTransport
    let settings: Settings
    /// The `authorization` each platform's endpoint gets.
    let credentials: ProviderCredentials
    /// The push service's base URL; in the embedded setup it is known only once it listens.
    let baseURL: @Sendable () async throws -> String
    let counters: BackendCounters
    /// The VAPID key Web Push requests are signed with (RFC 8292); browsers subscribe with its
    /// public half, which `GET /api/webpush/vapid` gives.
    let vapid: VAPIDSigner

    /// Sends with retries; `firstAttempt` and `lastFailure` carry on from attempts made
    /// elsewhere (``startFirstAttempt(_:to:trace:preferring:done:)``).
    func send(_ notification: NativeNotification, to handle: String, from firstAttempt: Int = 0, lastFailure: String = "no attempt") async
        -> Result
    {
        var lastFailure = lastFailure
        let attempts = max(1, settings.maxAttempts)
        for attempt in firstAttempt..<max(firstAttempt, attempts) {
            let base: String
            var post: ProviderPost
            do {
                base = try await baseURL().trimmingSuffix("/")
                post = try await makePost(notification, handle: handle, base: base)
            } catch let error as RequestError where error.handleIsUnusable {
                // A handle no push could ever reach is as dead as one the push service refused.
                return .unregistered
            } catch {
                counters.update { $0.pnsFailed += 1 }
                return .failed(reason: "\(error)")
            }
            if attempt > 0 {
                counters.update { $0.pnsRetried += 1 }
                let base = settings.backoff.nanosecondCount << min(attempt - 1, 16)
                try? await Task.sleep(for: .nanoseconds(base / 2 + Int64.random(in: 0...max(1, base / 2))))
            }
            counters.update { $0.pnsRequests += 1 }
            // Every attempt a client span of its own when the backend records spans; else the
            // caller's context handed on as it came.
            let outgoing = TracePropagation.outgoing("POST", url: base + post.path)
            post.headers += outgoing?.headers ?? TracePropagation.headers
            let step: Step
            do {
                let (status, body) = try await transport.post(post, base: base, timeout: settings.requestTimeout)
                outgoing?.finish(status: status)
                step = settle(status, body: body, platform: notification.platform)
            } catch {
                outgoing?.finish(status: nil, error: Self.isUnsendable(error) ? "invalid_request" : "unreachable")
                step = settle(error)
            }
            switch step {
            case .done(let result): return result
            case .again(let failure): lastFailure = failure
            }
        }
        counters.update { $0.pnsFailed += 1 }
        return .failed(reason: lastFailure)
    }

    /// What an attempt leaves to do: nothing more (its result), or another attempt.
    enum Step: Sendable {
        case done(Result)
        case again(lastFailure: String)
    }

    /// The first attempt of a push, begun at once from the event loop with no task, when nothing
    /// needs waiting for: the push service's base URL resolved by an earlier push, the platform's
    /// token fetched, a connection idle (over the project's own pool). `done` gets what its answer
    /// leaves to do, on the connection's loop; ``send(_:to:from:lastFailure:)`` from attempt 1 makes the
    /// rest. False when it could not begin: nothing was sent or counted.
    func startFirstAttempt(
        _ notification: NativeNotification, to handle: String, trace: [(String, String)], preferring loop: any EventLoop,
        done: @escaping @Sendable (Step) -> Void
    ) -> Bool {
        guard notification.platform != .webpush, let base = transport.currentPlainBase,
            let authorization = credentials.authorizationNow(for: notification.platform),
            var post = try? makePost(notification, handle: handle, base: base, authorization: authorization)
        else { return false }
        post.headers += trace
        let platform = notification.platform
        let started: Bool
        do {
            started = try transport.startIfIdle(post, base: base, timeout: settings.requestTimeout, preferring: loop) { [self] answer in
                switch answer {
                case .success(let (status, body)): done(settle(status, body: body, platform: platform))
                case .failure(let error): done(settle(error))
                }
            }
        } catch {
            return false
        }
        if started { counters.update { $0.pnsRequests += 1 } }
        return started
    }

    /// What an answer leaves to do, counted.
    private func settle(_ status: Int, body: ByteBuffer, platform: Platform) -> Step {
        switch Self.classify(status, platform: platform, body: body) {
        case .accepted:
            counters.update { $0.pnsAccepted += 1 }
            return .done(.accepted)
        case .unregistered:
            return .done(.unregistered)
        case .retry:
            return .again(lastFailure: "status \(status)")
        case .renewCredentials:
            // A refused or expired token: the next attempt presents a new one.
            credentials.invalidate(platform)
            return .again(lastFailure: "status \(status)")
        case .fail:
            counters.update { $0.pnsFailed += 1 }
            return .done(.failed(reason: "status \(status)"))
        }
    }

    /// What a request that got no answer leaves to do, counted.
    private func settle(_ error: any Error) -> Step {
        if case FleetHTTPError.invalidRequest(let why) = error {
            // Nothing was sent, and a repeat would not be either.
            counters.update { $0.pnsFailed += 1 }
            return .done(.failed(reason: "request not sendable: \(why)"))
        }
        return .again(lastFailure: "unreachable")
    }

    private static func isUnsendable(_ error: any Error) -> Bool {
        if case FleetHTTPError.invalidRequest = error { return true }
        return false
    }

    enum Verdict: Equatable {
        case accepted, unregistered, retry, renewCredentials, fail
    }

    /// What an answer of the push service means for the registration. A dead handle is one the
    /// service says is gone (APNs 410, FCM 404 `UNREGISTERED`, WNS 404/410) or can never be one of
    /// its tokens (APNs `BadDeviceToken`, FCM's invalid registration token), as a notification hub
    /// treats both: the registration is removed and the device registers again. Any other refusal
    /// is the sender's failure.
    static func classify(_ status: Int, platform: Platform, body: ByteBuffer) -> Verdict {
        switch (platform, status) {
        case (_, 200...299): .accepted
        case (.apns, 410), (.wns, 410), (.wns, 404), (.fcm, 404), (.webpush, 404), (.webpush, 410): .unregistered
        case (.apns, 400) where decoded(APNsRefusal.self, body)?.reason == "BadDeviceToken": .unregistered
        case (.fcm, 400) where decoded(FCMRefusal.self, body)?.error.message.contains("not a valid FCM registration token") == true:
            .unregistered
        case (.apns, 403), (.fcm, 401), (.wns, 401): .renewCredentials
        // Throttled (WNS says it with 406) or a transient server failure.
        case (_, 429), (.wns, 406), (_, 500), (_, 502), (_, 503), (_, 504): .retry
        default: .fail
        }
    }

    private static func decoded<T: Decodable>(_ type: T.Type, _ body: ByteBuffer) -> T? {
        try? JSONDecoder().decode(T.self, from: Data(body.readableBytesView))
    }

    struct RequestError: Error, CustomStringConvertible {
        var description: String
        /// The handle itself is why no request can be made.
        var handleIsUnusable = false
    }

    private func makePost(_ notification: NativeNotification, handle: String, base: String) async throws -> ProviderPost {
        // Web Push is signed per request with the backend's own VAPID key.
        if notification.platform == .webpush { return try webPushPost(notification, handle: handle, base: base) }
        return try makePost(notification, handle: handle, base: base, authorization: try await credentials.authorization(for: notification.platform))
    }

    /// An APNs, FCM or WNS request with its `authorization`.
    private func makePost(_ notification: NativeNotification, handle: String, base: String, authorization: String) throws -> ProviderPost {
        var path: String
        // One list, made once with room for every field: it is made for every push.
        var headers: [(String, String)] = []
        headers.reserveCapacity(8)
        var body: ByteBuffer
        switch notification.platform {
        case .apns:
            path = "/3/device/\(Self.pathSegment(handle))"
            headers.append(("apns-push-type", notification.pushType))
            headers.append(("apns-topic", settings.apnsTopic))
            headers.append(("apns-id", UUIDText.unguessable(upper: true)))
            headers.append(("apns-priority", notification.pushType == "alert" ? "10" : "5"))
            headers.append(("apns-expiration", String(Int(Date().timeIntervalSince1970) + 3600)))
            body = ByteBuffer(string: notification.bodyText)
        case .fcm:
            path = "/v1/projects/\(settings.fcmProject)/messages:send"
            var message = notification.body ?? [:]
            message["token"] = .string(handle)
            body = ByteBuffer(string: JSONValue.text(["message": .object(message)]))
        case .wns:
            path = String(try Self.channelURL(handle, base: base).dropFirst(base.count))
            // Hold raw pushes for an offline device too, so the secure flow survives a reconnect.
            headers.append(("X-WNS-Type", notification.pushType))
            headers.append(("X-WNS-Cache-Policy", "cache"))
            body = ByteBuffer(string: notification.text ?? "")
        case .mpns, .webpush:
            throw RequestError(description: "\(notification.platform.rawValue) is not sent to here")
        }
        headers.append(("authorization", authorization))
        headers.append(("content-type", notification.contentType))
        return ProviderPost(path: path, headers: headers, body: body)
    }

    /// A WNS handle is a channel URL on the push service, a channel URI of WNS's own form
    /// (`https://<region>.notify.windows.com/w/?token=…`, as devices get them from the push
    /// service over TLS), or a bare channel id. Any other URL is refused: posting to whatever URL
    /// a client registered would let any client make the backend send requests to hosts of its
    /// choosing. WNS-form URIs are delivered to the push service's own `/wns/{channel}`.
    static func channelURL(_ handle: String, base: String) throws -> String {
        guard handle.hasPrefix("http://") || handle.hasPrefix("https://") else {
            return "\(base)/wns/\(pathSegment(handle))"
        }
        if handle.hasPrefix(base + "/wns/") { return handle }
        if let channel = wnsFormChannel(handle, base: base) { return "\(base)/wns/\(pathSegment(channel))" }
        throw RequestError(description: "channel URL is not on the push service", handleIsUnusable: true)
    }

    /// The channel of a URI in WNS's form on a WNS host or on the push service's own host.
    private static func wnsFormChannel(_ handle: String, base: String) -> String? {
        guard let uri = URLComponents(string: handle), uri.scheme == "https" || uri.scheme == "http",
            let host = uri.host?.lowercased(), uri.user == nil, uri.password == nil,
            uri.path == "/w/" || uri.path == "/w" || uri.path == "/" || uri.path.isEmpty,
            let items = uri.queryItems, items.count == 1, items[0].name == "token",
            let channel = items[0].value, !channel.isEmpty
        else { return nil }
        let ownHost = URLComponents(string: base)?.host?.lowercased()
        guard host.hasSuffix(".notify.windows.com") || host == ownHost else { return nil }
        return channel
    }

    static func pathSegment(_ text: String) -> String {
        // Tokens are hex or base64url: nothing to escape, and no CharacterSet built per push.
        if text.utf8.allSatisfy(isUnreserved) { return text }
        return text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? text
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        var result = self
        while result.hasSuffix(suffix) { result.removeLast(suffix.count) }
        return result
    }
}

/// APNs' error body.
private struct APNsRefusal: Decodable {
    var reason: String
}

/// FCM's error body; its message is what tells an invalid token from other invalid arguments.
private struct FCMRefusal: Decodable {
    struct Inner: Decodable {
        var message: String
    }

    var error: Inner
}
