public import Foundation

/// A browser's subscription as the Push API's `PushSubscription.toJSON()` writes it, and as a
/// browser hands it to its application server: `{"endpoint","expirationTime"?,"keys":{"p256dh","auth"}}`.
public struct WebPushSubscription: Sendable, Equatable, Codable {
    public struct Keys: Sendable, Equatable, Codable {
        public var p256dh: String
        public var auth: String

        public init(p256dh: String, auth: String) {
            self.p256dh = p256dh
            self.auth = auth
        }
    }

    public var endpoint: String
    public var keys: Keys

    public init(endpoint: String, keys: Keys) {
        self.endpoint = endpoint
        self.keys = keys
    }

    /// Compact JSON, the form a backend stores as the device's handle.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// Parses and checks a subscription from outside: an absolute http(s) endpoint and keys that
    /// are a P-256 point and a 16-byte secret.
    public static func parse(_ text: String) throws(WebPushCryptoError) -> (subscription: WebPushSubscription, endpoint: URL, recipient: WebPushRecipient) {
        guard let subscription = try? JSONDecoder().decode(WebPushSubscription.self, from: Data(text.utf8)) else {
            throw .malformed(#"a subscription is {"endpoint":"…","keys":{"p256dh":"…","auth":"…"}}"#)
        }
        guard let url = URL(string: subscription.endpoint), let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http",
            url.host?.isEmpty == false, subscription.endpoint.utf8.count <= 2048
        else { throw .malformed("the endpoint is not an http(s) URL") }
        let recipient = try WebPushRecipient(p256dh: subscription.keys.p256dh, auth: subscription.keys.auth)
        return (subscription, url, recipient)
    }
}
