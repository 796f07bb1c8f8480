import Synchronization

/// Checks VAPID headers, remembering the ones that verified: a sender that signs once per
/// audience and hour sends the same header with every message, and the ES256 check is the
/// costliest step of taking a message (`bench delivery`). A header seen before is checked again
/// only for what changes with time and place (`exp`, `aud`); its signature held then and holds now.
public final class VAPIDVerifier: Sendable {
    private let verified = Mutex<[String: VAPID.Credential]>([:])
    private let capacity: Int

    /// Remembers at most `capacity` headers; past it, it starts over.
    public init(capacity: Int = 4096) {
        self.capacity = max(1, capacity)
    }

    public func verify(authorization: String?, cryptoKey: String?, origin: String, now: Int64) -> Result<VAPID.Credential, VAPID.Rejection> {
        // The draft form's key is in Crypto-Key, so it is part of what was checked.
        let key = (authorization ?? "") + "\n" + (authorization?.lowercased().hasPrefix("webpush") == true ? cryptoKey ?? "" : "")
        if let known = verified.withLock({ $0[key] }) {
            return VAPID.check(known.claims, origin: origin, now: now).map { known }
        }
        let result = VAPID.verify(authorization: authorization, cryptoKey: cryptoKey, origin: origin, now: now)
        // A real header is a few hundred bytes; a sender's own long claims are not kept.
        if case .success(let credential) = result, key.utf8.count <= 1024 {
            verified.withLock { headers in
                if headers.count >= capacity { headers.removeAll(keepingCapacity: true) }
                headers[key] = credential
            }
        }
        return result
    }
}
