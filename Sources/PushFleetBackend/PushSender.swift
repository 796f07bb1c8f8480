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

    func send(_ notification: NativeNotification, to handle: String) async -> Result {
        var lastFailure = "no attempt"
        for attempt in 0..<max(1, settings.maxAttempts) {
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
            let status: Int
            let body: ByteBuffer
            do {
                (status, body) = try await transport.post(post, base: base, timeout: settings.requestTimeout)
                outgoing?.finish(status: status)
            } catch FleetHTTPError.invalidRequest(let why) {
                // Nothing was sent, and a repeat would not be either.
                outgoing?.finish(status: nil, error: "invalid_request")
                counters.update { $0.pnsFailed += 1 }
                return .failed(reason: "request not sendable: \(why)")
            } catch {
                outgoing?.finish(status: nil, error: "unreachable")
                lastFailure = "unreachable"
                continue
            }
            switch Self.classify(status, platform: notification.platform, body: body) {
            case .accepted:
                counters.update { $0.pnsAccepted += 1 }
                return .accepted
            case .unregistered:
                return .unregistered
            case .retry:
                lastFailure = "status \(status)"
            case .renewCredentials:
                // A refused or expired token: the next attempt presents a new one.
                credentials.invalidate(notification.platform)
                lastFailure = "status \(status)"
            case .fail:
                counters.update { $0.pnsFailed += 1 }
                return .failed(reason: "status \(status)")
            }
        }
        counters.update { $0.pnsFailed += 1 }
        return .failed(reason: lastFailure)
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
        let authorization = try await credentials.authorization(for: notification.platform)
        var path: String
        var headers: [(String, String)]
        var body: Data
        switch notification.platform {
        case .apns:
            path = "/3/device/\(Self.pathSegment(handle))"
            headers = [
                ("apns-push-type", notification.pushType), ("apns-topic", settings.apnsTopic), ("apns-id", UUIDText.unguessable(upper: true)),
                ("apns-priority", notification.pushType == "alert" ? "10" : "5"),
                ("apns-expiration", String(Int(Date().timeIntervalSince1970) + 3600)),
            ]
            body = notification.bodyJSON
        case .fcm:
            path = "/v1/projects/\(settings.fcmProject)/messages:send"
            headers = []
            var message = notification.body ?? [:]
            message["token"] = .string(handle)
            body = Data(JSONValue.text(["message": .object(message)]).utf8)
        case .wns:
            path = String(try Self.channelURL(handle, base: base).dropFirst(base.count))
            // Hold raw pushes for an offline device too, so the secure flow survives a reconnect.
            headers = [("X-WNS-Type", notification.pushType), ("X-WNS-Cache-Policy", "cache")]
            body = Data((notification.text ?? "").utf8)
        case .mpns, .webpush:
            throw RequestError(description: "\(notification.platform.rawValue) is not sent to here")
        }
        headers.append(("authorization", authorization))
        headers.append(("content-type", notification.contentType))
        return ProviderPost(path: path, headers: headers, body: ByteBuffer(bytes: body))
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
