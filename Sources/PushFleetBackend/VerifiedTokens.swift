import Synchronization

/// Login tokens this backend has verified, with the user each names and its expiry. A device
/// presents the same token on every call; its signature, checked once, holds for the signer's
/// life (the key never changes), so a hit is the verification's answer without its HMAC and
/// parse, and can be given on the event loop, where jwt-kit's key collection (an actor) cannot.
/// Bounded: when full it starts again empty, which costs a verification per token, never a wrong
/// answer. The backend keeps a second one for Basic `Authorization` values, which never expire.
final class VerifiedTokens: Sendable {
    private struct Entry {
        var user: String
        var expires: Int64
    }

    private let entries = Mutex<[String: Entry]>([:])
    let capacity: Int

    init(capacity: Int = 65_536) {
        self.capacity = max(1, capacity)
    }

    /// The user of a token verified before and not expired at `now` (seconds since the epoch).
    func user(of token: String, now: Int64) -> String? {
        guard let entry = entries.withLock({ $0[token] }), entry.expires > now else { return nil }
        return entry.user
    }

    func insert(_ token: String, user: String, expires: Int64) {
        entries.withLock { entries in
            if entries.count >= capacity, entries[token] == nil { entries.removeAll(keepingCapacity: true) }
            entries[token] = Entry(user: user, expires: expires)
        }
    }

    var count: Int { entries.withLock { $0.count } }
}
