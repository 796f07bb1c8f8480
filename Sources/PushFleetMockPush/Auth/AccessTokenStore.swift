import PushFleetCore
import PushFleetServerSupport
import Synchronization

/// Access tokens the mock minted (Google's and WNS's OAuth), with what each grants and when it
/// expires. Time is given by the caller (seconds since the epoch). Bounded: when full, expired
/// tokens go first; if none has expired, minting is refused rather than memory growing.
final class AccessTokenStore<Grant: Sendable>: Sendable {
    enum Lookup {
        case valid(Grant)
        case expired
        case unknown
    }

    private struct Entry {
        var grant: Grant
        var expiresAt: Int64
    }

    let capacity: Int
    private let prefix: String
    private let entries = Mutex<[String: Entry]>([:])

    /// - Parameters:
    ///   - prefix: the start of every token (Google's access tokens start `ya29.`).
    ///   - capacity: tokens held at once.
    init(prefix: String, capacity: Int = 100_000) {
        self.prefix = prefix
        self.capacity = max(1, capacity)
    }

    /// A new token for `grant`, valid for `lifetime` seconds from `now`; nil when the store is
    /// full of live tokens.
    func mint(_ grant: Grant, lifetime: Int64, now: Int64) -> String? {
        var generator = SystemRandomNumberGenerator()
        let token = prefix + (0..<4).map { _ in String(generator.next() as UInt64, radix: 36) }.joined(separator: "-")
        return entries.withLock { entries -> String? in
            if entries.count >= capacity {
                for token in ExpirySweep.expired(in: entries, now: now, expiresAt: \.expiresAt) { entries[token] = nil }
                guard entries.count < capacity else { return nil }
            }
            entries[token] = Entry(grant: grant, expiresAt: now + lifetime)
            return token
        }
    }

    func lookup(_ token: String, now: Int64) -> Lookup {
        entries.withLock { entries in
            guard let entry = entries[token] else { return .unknown }
            return entry.expiresAt > now ? .valid(entry.grant) : .expired
        }
    }

    var count: Int { entries.withLock { $0.count } }
}
