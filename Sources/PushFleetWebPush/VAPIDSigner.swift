public import Crypto
public import Foundation
import PushFleetCore
import Synchronization

/// Signs VAPID headers for an application server, one per audience, renewed when less than
/// `renewBefore` of its life is left, as push libraries that cache their headers do.
public final class VAPIDSigner: Sendable {
    public let key: P256.Signing.PrivateKey
    public let subject: String
    private let lifetime: Int64
    private let renewBefore: Int64
    private let headers = Mutex<[String: (header: String, expiresAt: Int64)]>([:])

    public init(key: P256.Signing.PrivateKey = .init(), subject: String, lifetime: Int64 = 12 * 3600, renewBefore: Int64 = 11 * 3600) {
        self.key = key
        self.subject = subject
        self.lifetime = min(lifetime, VAPID.maxLifetime)
        self.renewBefore = min(renewBefore, self.lifetime)
    }

    /// The public key as pages subscribe with it (`applicationServerKey`): base64url of the
    /// uncompressed point.
    public var applicationServerKey: String { Base64URL.encode(key.publicKey.x963Representation) }

    /// The `Authorization` value for a request to `endpoint` at `now` (seconds since 1970).
    public func authorization(for endpoint: URL, now: Int64) throws(VAPID.Rejection) -> String {
        guard let origin = VAPID.origin(of: endpoint) else { throw .malformed("\(endpoint) has no origin") }
        if let cached = headers.withLock({ $0[origin] }), cached.expiresAt - now > renewBefore { return cached.header }
        let expiresAt = now + lifetime
        let header = try VAPID.authorization(for: endpoint, key: key, subject: subject, expiresAt: expiresAt)
        headers.withLock { cache in
            if cache.count >= 1024 { cache.removeAll(keepingCapacity: true) }
            cache[origin] = (header, expiresAt)
        }
        return header
    }
}
