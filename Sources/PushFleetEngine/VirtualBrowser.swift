import Foundation
import PushFleetCore
import PushFleetWebPush
import PushFleetWire
import Synchronization

/// What a browser hands its backend (W3C Push API `PushSubscription.toJSON()`), field by field.
struct BrowserSubscription: Sendable {
    let endpoint: String
    let p256dh: String
    let auth: String
    /// `{"endpoint":…,"keys":{"auth":…,"p256dh":…}}`, as a page posts it: made once, as every
    /// request a browser renders (a fetch per push too) may name it.
    let json: String

    init(endpoint: String, p256dh: String, auth: String) {
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
        json = WebPushSubscription(endpoint: endpoint, keys: .init(p256dh: p256dh, auth: auth)).json
    }
}

/// The Push API side of a `webpush` device: its P-256 key pair and auth secret (RFC 8291), the
/// push service whose endpoint form it gets, and the subscription once the push service minted
/// it. Payloads are decrypted here, as the browser does before the service worker sees them.
final class VirtualBrowser: Sendable {
    let keys: WebPushKeys
    let service: WebPushReceive.Service
    private let subscribed = Mutex<BrowserSubscription?>(nil)

    init(service: WebPushReceive.Service) {
        keys = .generate()
        self.service = service
    }

    var subscription: BrowserSubscription? { subscribed.withLock { $0 } }

    func subscribed(endpoint: String) {
        subscribed.withLock { $0 = BrowserSubscription(endpoint: endpoint, p256dh: keys.p256dh, auth: keys.auth) }
    }

    /// The plaintext of a push (a push without a payload has none), or why it cannot be read.
    func decrypt(_ frame: PushFrame) -> Result<[UInt8], WebPushCryptoError> {
        guard let encodingName = frame.webPush?.contentEncoding else {
            return frame.body.isEmpty ? .success([]) : .failure(.malformed("a payload without Content-Encoding"))
        }
        guard let encoding = WebPushContentEncoding(rawValue: encodingName) else { return .failure(.malformed("Content-Encoding \(encodingName)")) }
        guard let body = frame.bodyEncoding == "base64" ? Data(base64Encoded: frame.body) : Data(frame.body.utf8) else {
            return .failure(.malformed("the push service's frame body is not base64"))
        }
        do {
            let plaintext = try WebPushEncryption.decrypt(
                body, encoding: encoding, encryption: frame.webPush?.encryption, cryptoKey: frame.webPush?.cryptoKey, keys: keys
            )
            return .success(Array(plaintext))
        } catch {
            return .failure(error)
        }
    }
}
