import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
package import PushFleetWire

/// A test backend's way out to the mock push service: one provider request per push, as APNs,
/// FCM v1 and WNS take them, with the providers' credentials fetched once.
package final class TestPushSender: Sendable {
    package let pushService: String
    private let credentials = TestCredentials.Cache()
    /// Its own client, shut down with the backend: the shared one keeps idle connections for
    /// ten minutes, and a push service shutting down gracefully would wait for them.
    private let client = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: .init(connectionPool: .init(idleTimeout: .seconds(5)))
    )

    package init(pushService: String) {
        self.pushService = pushService
    }

    package func shutdown() async {
        try? await client.shutdown()
    }

    /// One provider request; true when the push service accepted it, false when it said the
    /// token is dead. `raw` is the APNs payload, FCM's message without its token, or WNS's body.
    package func push(raw: String, platform: Platform, handle: String, pushType: String) async -> Bool {
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
        guard let authorization = try? await credentials.authorization(for: platform, pushService: pushService) else { return true }
        request.headers.add(name: "authorization", value: authorization)
        request.headers.add(name: "content-type", value: platform == .wns && pushType == "wns/toast" ? "text/xml" : "application/json")
        request.body = .bytes(ByteBuffer(string: body))
        guard let response = try? await client.execute(request, timeout: .seconds(10)) else { return true }
        _ = try? await response.body.collect(upTo: 1 << 16)
        return !(response.status.code == 410 || (response.status.code == 404 && platform != .apns))
    }
}
