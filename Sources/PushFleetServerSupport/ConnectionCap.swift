public import HummingbirdCore
public import NIOCore
import Synchronization

/// The accept-side connection cap, which keeps room for clients that are not stalled.
///
/// Past ``max`` connections new ones wait in the listen backlog. A full server would then serve
/// nobody new while slow clients hold every slot (each within its timeouts), so whenever the cap
/// is reached the connection that has been stalled longest is closed (see
/// ``StalledConnections``): a request head or body still arriving, or a keep-alive connection
/// between requests. Busy connections (a response being made, an upgraded WebSocket, an HTTP/2
/// connection without a pending body) are never closed for room.
public struct ConnectionCap: AvailableConnectionsDelegate {
    public let max: Int
    public let stalled: StalledConnections
    var count = 0

    public init(_ max: Int, stalled: StalledConnections = StalledConnections()) {
        self.max = max
        self.stalled = stalled
    }

    public mutating func connectionOpened() { count += 1 }
    public mutating func connectionClosed() { count -= 1 }

    public func isAcceptingNewConnections() -> Bool {
        guard count < max else {
            // Its close comes back as connectionClosed, which takes the next connection.
            stalled.evictLongestStalled()
            return false
        }
        return true
    }
}

/// The connections of one server that are stalled, and since when.
public final class StalledConnections: Sendable {
    struct Entry {
        let channel: any Channel
        /// Stalled phases in progress (HTTP/2 has one per stream) and when the first began.
        var depth = 0
        var since: Int64 = 0
        var evicted = false
    }

    /// Sent down a connection chosen to make room: answer 503 if nothing was answered, close.
    struct Evict {}

    private let entries = Mutex<[ObjectIdentifier: Entry]>([:])

    public init() {}

    /// Tracks `channel` until it closes.
    func register(_ channel: any Channel) {
        let key = ObjectIdentifier(channel)
        entries.withLock { $0[key] = Entry(channel: channel) }
        channel.closeFuture.whenComplete { [weak self] _ in
            _ = self?.entries.withLock { $0.removeValue(forKey: key) }
        }
    }

    /// A phase in which the client owes bytes began on `channel` (or its parent, for a stream).
    func began(_ channel: any Channel, now: Int64) {
        entries.withLock { entries in
            guard let key = Self.key(channel, in: entries) else { return }
            if entries[key]!.depth == 0 { entries[key]!.since = now }
            entries[key]!.depth += 1
        }
    }

    /// That phase ended.
    func ended(_ channel: any Channel) {
        entries.withLock { entries in
            guard let key = Self.key(channel, in: entries), entries[key]!.depth > 0 else { return }
            entries[key]!.depth -= 1
        }
    }

    private static func key(_ channel: any Channel, in entries: [ObjectIdentifier: Entry]) -> ObjectIdentifier? {
        let own = ObjectIdentifier(channel)
        if entries[own] != nil { return own }
        return channel.parent.map { ObjectIdentifier($0) }.flatMap { entries[$0] != nil ? $0 : nil }
    }

    public var stalledCount: Int { entries.withLock { $0.values.count { $0.depth > 0 && !$0.evicted } } }

    /// Closes the connection stalled longest, if any is.
    func evictLongestStalled() {
        let victim: (any Channel)? = entries.withLock { entries in
            let candidates = entries.map { (key: $0.key, since: $0.value.depth > 0 && !$0.value.evicted ? $0.value.since : nil) }
            guard let key = Self.longestStalled(candidates) else { return nil }
            entries[key]!.evicted = true
            return entries[key]!.channel
        }
        victim?.pipeline.fireUserInboundEventTriggered(Evict())
    }

    /// The key whose stall began first; nil when none is stalled.
    static func longestStalled<Key>(_ candidates: [(key: Key, since: Int64?)]) -> Key? {
        var best: (key: Key, since: Int64)?
        for candidate in candidates {
            guard let since = candidate.since else { continue }
            if best == nil || since < best!.since { best = (candidate.key, since) }
        }
        return best?.key
    }
}

extension ServerLimits {
    /// The cap for one server: pass it as the server's `availableConnectionsDelegate` and to
    /// its ``GuardedChildChannel``s.
    public func connectionCap() -> ConnectionCap {
        ConnectionCap(maxConnections ?? Self.defaultMaxConnections())
    }
}
