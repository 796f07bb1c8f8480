import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
package import PushFleetWire
import PushFleetWebPush
import Synchronization

/// A test backend's way out to the mock push service: one provider request per push, as APNs,
/// FCM v1 and WNS take them, with the providers' credentials fetched once.
package final class TestPushSender: Sendable {
    package let pushService: String
    /// Pushes with credentials the push service does not accept.
    private let wrongCredentials: Bool
    private let credentials = TestCredentials.Cache()
    /// Pushes the push service refused, by `platform status` (`apns 403`); a dead token is not a refusal.
    private let refusedCounts = Mutex<[String: Int]>([:])
    /// Its own client, shut down with the backend: the shared one keeps idle connections for
    /// ten minutes, and a push service shutting down gracefully would wait for them.
    private let client = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: .init(connectionPool: .init(idleTimeout: .seconds(5)))
    )

    package init(pushService: String, wrongCredentials: Bool = false) {
        self.pushService = pushService
        self.wrongCredentials = wrongCredentials
    }

    package var refused: [String: Int] { refusedCounts.withLock { $0 } }

    package func resetCounts() {
        refusedCounts.withLock { $0 = [:] }
    }

    package func shutdown() async {
        try? await client.shutdown()
    }

    /// One provider request; true when the push service accepted it, false when it said the
    /// token is dead. `raw` is the APNs payload, FCM's message without its token, or WNS's body.
    package func push(raw: String, platform: Platform, handle: String, pushType: String) async -> Bool {
        if platform == .webpush { return await pushWebPush(raw: raw, subscription: handle) }
        var request: HTTPClientRequest
        var body = raw
        switch platform {
        case .apns:
            request = HTTPClientRequest(url: "\(pushService)/3/device/\(handle)")
            request.headers.add(name: "apns-push-type", value: pushType)
            request.headers.add(name: "apns-topic", value: "com.example.hostile")
        case .fcm:
            request = HTTPClientRequest(url: "\(pushService)/v1/projects/demo/messages:send")
            var message = (try? JSONSerialization.jsonObject(with: Data(raw.utf8)) as? [String: Any]) ?? [:]
            message["token"] = handle
            body = String(decoding: (try? JSONSerialization.data(withJSONObject: ["message": message])) ?? Data(), as: UTF8.self)
        default:
            request = HTTPClientRequest(url: "\(pushService)/wns/\(handle)")
            request.headers.add(name: "X-WNS-Type", value: pushType)
            request.headers.add(name: "X-WNS-Cache-Policy", value: "cache")
        }
        request.method = .POST
        if wrongCredentials {
            request.headers.add(name: "authorization", value: "bearer not-the-push-credentials")
        } else {
            guard let authorization = try? await credentials.authorization(for: platform, pushService: pushService) else { return true }
            request.headers.add(name: "authorization", value: authorization)
        }
        request.headers.add(name: "content-type", value: platform == .wns && pushType == "wns/toast" ? "text/xml" : "application/json")
        request.body = .bytes(ByteBuffer(string: body))
        guard let response = try? await client.execute(request, timeout: .seconds(10)) else { return true }
        _ = try? await response.body.collect(upTo: 1 << 16)
        let dead = response.status.code == 410 || (response.status.code == 404 && platform != .apns)
        if response.status.code >= 400 && !dead { refusedCounts.withLock { $0["\(platform.rawValue) \(response.status.code)", default: 0] += 1 } }
        return !dead
    }

    /// The key browsers subscribe with (`GET /api/webpush/vapid`).
    private let vapid = VAPIDSigner(subject: "mailto:hostile@example.com")
    package var applicationServerKey: String { vapid.applicationServerKey }
    /// Web Push messages sent, to alternate the two encodings.
    private let webPushCount = Atomic<Int>(0)

    /// A Web Push message for the subscription JSON `handle`: every second one in the older
    /// `aesgcm` encoding, as libraries of its time still send; with `foreignKeys`, encrypted for
    /// keys that are not the subscription's, which no browser can decrypt.
    package func pushWebPush(raw: String, subscription handle: String, foreignKeys: Bool = false) async -> Bool {
        guard let (_, endpoint, recipient) = try? WebPushSubscription.parse(handle),
            var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false)
        else { return true }
        let base = URLComponents(string: pushService)
        components.scheme = base?.scheme
        components.host = base?.host
        components.port = base?.port
        let stranger = WebPushKeys.generate()
        guard let url = components.url,
            let target = foreignKeys ? try? WebPushRecipient(publicKey: stranger.publicKey, authSecret: stranger.authSecret) : recipient
        else { return true }
        let encoding: WebPushContentEncoding = webPushCount.add(1, ordering: .relaxed).newValue % 2 == 0 ? .aesgcm : .aes128gcm
        guard let sealed = try? WebPushEncryption.encrypt(Data(raw.utf8), for: target, encoding: encoding),
            let authorization = try? vapid.authorization(for: url, now: Int64(Date().timeIntervalSince1970))
        else { return true }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.headers.add(name: "authorization", value: authorization)
        request.headers.add(name: "ttl", value: "600")
        request.headers.add(name: "content-encoding", value: sealed.encoding.rawValue)
        if let encryption = sealed.encryption { request.headers.add(name: "encryption", value: encryption) }
        if let cryptoKey = sealed.cryptoKey { request.headers.add(name: "crypto-key", value: cryptoKey) }
        request.body = .bytes(ByteBuffer(bytes: sealed.body))
        guard let response = try? await client.execute(request, timeout: .seconds(10)) else { return true }
        _ = try? await response.body.collect(upTo: 1 << 16)
        let dead = response.status.code == 410 || response.status.code == 404
        if response.status.code >= 400 && !dead { refusedCounts.withLock { $0["webpush \(response.status.code)", default: 0] += 1 } }
        return !dead
    }
}
