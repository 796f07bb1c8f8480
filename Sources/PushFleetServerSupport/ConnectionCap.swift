public import HummingbirdCore
import NIOCore
import PushFleetCore
import Synchronization

/// The accept-side connection cap, which keeps room for clients that are not stalled.
///
/// Past ``max`` connections new ones wait in the listen backlog. A full server would then serve
/// nobody new while slow clients hold every slot (each within its timeouts), so whenever the cap
/// is reached a stalled connection is closed (see ``StalledConnections``): one whose request head
/// or body has begun and is still arriving, once it has stalled for ``ServerLimits/evictionGrace``;
/// a *quiet* one — nothing read from it yet, or a kept-alive connection between requests — only
/// once quiet for ten times that (at least 10 s), because under a storm of new connections the
/// server itself is slow to read them, and closing unread devices or a provider's pooled
/// connection for that would punish the clients for the server's backlog. Busy connections (a
/// response being made, an upgraded WebSocket, an HTTP/2 connection without a pending body) are
/// never closed for room.
public struct ConnectionCap: AvailableConnectionsDelegate {
    public var max: Int { stalled.max }
    public let stalled: StalledConnections

    public init(_ max: Int, evictionGrace: Duration = .seconds(1)) {
        stalled = StalledConnections(max: max, grace: evictionGrace)
    }

    public mutating func connectionOpened() { stalled.open.withLock { $0 += 1 } }
    public mutating func connectionClosed() { stalled.open.withLock { $0 -= 1 } }

    public func isAcceptingNewConnections() -> Bool {
        guard !stalled.isFull else {
            // Its close comes back as connectionClosed, which takes the next connection.
            stalled.evictLongestStalled(now: FirstRequestGuard.now())
            return false
        }
        return true
    }
}

/// The connections of one server that are stalled, and since when.
public final class StalledConnections: Sendable {
    struct Entry {
        let channel: any Channel
        /// Phases in which the client owes bytes, in progress (HTTP/2 has one per stream), and
        /// when the first began.
        var depth = 0
        var since: Int64 = 0
        /// Quiet phases in progress (nothing read yet; kept alive between requests), and when.
        var quietDepth = 0
        var quietSince: Int64 = 0
        var evicted = false

        mutating func began(now: Int64, quiet: Bool) {
            if quiet {
                if quietDepth == 0 { quietSince = now }
                quietDepth += 1
            } else {
                if depth == 0 { since = now }
                depth += 1
            }
        }

        mutating func ended(quiet: Bool) {
            if quiet {
                if quietDepth > 0 { quietDepth -= 1 }
            } else if depth > 0 {
                depth -= 1
            }
        }

        /// When it may be closed for room; nil while it is busy.
        func due(grace: Int64, quietGrace: Int64) -> Int64? {
            guard !evicted else { return nil }
            if depth > 0 { return PushFleetServerSupport.deadline(since, plus: grace) }
            if quietDepth > 0 { return PushFleetServerSupport.deadline(quietSince, plus: quietGrace) }
            return nil
        }
    }

    /// Sent down a connection chosen to make room: answer 503 if nothing was answered, close.
    struct Evict {}

    private let entries = Mutex<[ObjectIdentifier: Entry]>([:])
    /// How long a connection must have been stalled to be closed for room.
    let grace: Int64
    /// How long a quiet connection must have been quiet.
    let quietGrace: Int64
    let max: Int
    /// Connections open now, counted as the server accepts and closes them.
    let open = Mutex(0)
    /// A later look is scheduled, for when the longest stall passes the grace.
    private let retrying = Mutex(false)
    /// A look is wanted but no connection was there to schedule it on.
    private let unscheduled = Mutex(false)

    init(max: Int, grace: Duration) {
        self.max = max
        self.grace = grace.saturatingNanoseconds
        self.quietGrace = Swift.max(10_000_000_000, Saturating.multiply(self.grace, 10))
    }

    var isFull: Bool { open.withLock { $0 >= max } }

    /// Tracks `channel` until it closes.
    func register(_ channel: any Channel) {
        let key = ObjectIdentifier(channel)
        entries.withLock { $0[key] = Entry(channel: channel) }
        // A full server found none of its connections set up yet: look from this one's loop.
        if unscheduled.withLock({ wanted in
            defer { wanted = false }
            return wanted
        }) {
            scheduleLook(on: channel.eventLoop, at: PushFleetServerSupport.deadline(FirstRequestGuard.now(), plus: grace))
        }
        channel.closeFuture.whenComplete { [weak self] _ in
            _ = self?.entries.withLock { $0.removeValue(forKey: key) }
        }
    }

    /// A phase in which the client owes bytes (or, `quiet`, one in which it is silent) began on
    /// `channel` (or its parent, for a stream).
    func began(_ channel: any Channel, now: Int64, quiet: Bool = false) {
        entries.withLock { Self.update(channel, in: &$0) { $0.began(now: now, quiet: quiet) } }
    }

    /// That phase ended.
    func ended(_ channel: any Channel, quiet: Bool = false) {
        entries.withLock { Self.update(channel, in: &$0) { $0.ended(quiet: quiet) } }
    }

    /// The entry of `channel`, or of its parent for a stream, changed in place: one look-up, no
    /// copy of the entry (an HTTP/1.1 connection goes quiet and back on every request).
    private static func update(_ channel: any Channel, in entries: inout [ObjectIdentifier: Entry], _ change: (inout Entry) -> Void) {
        if let index = entries.index(forKey: ObjectIdentifier(channel)) {
            change(&entries.values[index])
        } else if let parent = channel.parent, let index = entries.index(forKey: ObjectIdentifier(parent)) {
            change(&entries.values[index])
        }
    }

    public var stalledCount: Int { entries.withLock { $0.values.count { $0.depth > 0 && !$0.evicted } } }

    /// Closes the connection whose time to be closed for room came first, if it has come; else
    /// looks again when it will, or after a grace when none is stalled yet (the server takes no
    /// connection until one closes, so it must look again itself).
    func evictLongestStalled(now: Int64) {
        let action: (channel: any Channel, evict: Bool, at: Int64)? = entries.withLock { entries in
            let candidates = entries.map { (key: $0.key, due: $0.value.due(grace: grace, quietGrace: quietGrace)) }
            switch Self.room(candidates, now: now, grace: grace) {
            case .evict(let key):
                entries[key]!.evicted = true
                return (entries[key]!.channel, true, now)
            case .lookAgain(let at):
                return entries.first.map { ($0.value.channel, false, at) }
            }
        }
        guard let action else {
            // Connections accepted but not set up yet (they register from their own loops).
            unscheduled.withLock { $0 = true }
            return
        }
        if action.evict {
            action.channel.pipeline.fireUserInboundEventTriggered(Evict())
            return
        }
        scheduleLook(on: action.channel.eventLoop, at: action.at)
    }

    /// One look at a time is scheduled.
    private func scheduleLook(on loop: any EventLoop, at: Int64) {
        guard retrying.withLock({ scheduled in
            defer { scheduled = true }
            return !scheduled
        }) else { return }
        loop.scheduleTask(deadline: NIODeadline.uptimeNanoseconds(UInt64(Swift.max(0, at)))) { [weak self] in
            guard let self else { return }
            retrying.withLock { $0 = false }
            if isFull { evictLongestStalled(now: FirstRequestGuard.now()) }
        }
    }

    /// The shortest wait before a full server looks again for a connection to close.
    static let minimumLook: Int64 = 10_000_000

    enum Room<Key: Equatable>: Equatable {
        case evict(Key)
        case lookAgain(at: Int64)
    }

    /// What a full server does now: close the connection whose time to be closed for room
    /// (``Entry/due(grace:quietGrace:)``) came first, once it has come, else look again then —
    /// at the latest a grace from now, since a connection that stalls later may come due first.
    static func room<Key: Equatable>(_ candidates: [(key: Key, due: Int64?)], now: Int64, grace: Int64) -> Room<Key> {
        // Never sooner than `minimumLook`: with no grace, a full server with nothing due yet
        // looked again at once, for ever, and spun its loop.
        let next = PushFleetServerSupport.deadline(now, plus: Swift.max(grace, minimumLook))
        guard let (key, due) = earliestDue(candidates) else { return .lookAgain(at: next) }
        return due <= now ? .evict(key) : .lookAgain(at: min(due, next))
    }

    /// The candidate whose time came first; nil when none is stalled.
    static func earliestDue<Key>(_ candidates: [(key: Key, due: Int64?)]) -> (Key, Int64)? {
        var best: (key: Key, due: Int64)?
        for candidate in candidates {
            guard let due = candidate.due else { continue }
            if best == nil || due < best!.due { best = (candidate.key, due) }
        }
        return best
    }
}

extension ServerLimits {
    /// The cap for one server: pass it as the server's `availableConnectionsDelegate` and to
    /// its ``GuardedChildChannel``s.
    public func connectionCap() -> ConnectionCap {
        ConnectionCap(maxConnections ?? Self.defaultMaxConnections(), evictionGrace: evictionGrace)
    }
}
