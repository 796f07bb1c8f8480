import Foundation
import PushFleetCore
import PushFleetServerSupport
import Synchronization

/// Stored secure and rich notifications, readable by their recipient only.
final class NotificationStore: Sendable {
    enum Content: Sendable, Equatable {
        case secure(payload: String)
        case rich(message: String, type: String, contentType: String, data: Data)
    }

    struct Notification: Sendable, Equatable {
        var id: String
        var sender: String
        var recipient: String
        var content: Content
        var read: Bool
        var expiresAt: Int64
    }

    private struct State {
        var byID: [String: Notification] = [:]
        var bytes = 0
        /// Ids in the order they were stored, which is the order they expire in (one TTL for
        /// all), from `head` on; ids already gone are skipped when they come up.
        var queue: [(id: String, expiresAt: Int64)] = []
        var head = 0

        mutating func remove(_ id: String) {
            if let gone = byID.removeValue(forKey: id) { bytes -= gone.content.byteCount }
        }

        /// Drops at most `limit` of the oldest entries expired at `now`; how many were dropped
        /// (gone ones included), and whether any expired one may be left.
        mutating func dropExpired(now: Int64, limit: Int) -> (dropped: Int, more: Bool) {
            var dropped = 0
            while head < queue.count, queue[head].expiresAt <= now {
                guard dropped < limit else { return (dropped, true) }
                remove(queue[head].id)
                head += 1
                dropped += 1
            }
            if head > 1024, head * 2 > queue.count {
                queue.removeFirst(head)
                head = 0
            }
            return (dropped, false)
        }
    }

    private let state = Mutex(State())
    let ttl: Duration
    let maxCount: Int
    let maxBytes: Int

    init(ttl: Duration, maxCount: Int = .max, maxBytes: Int = .max) {
        self.ttl = ttl
        self.maxCount = maxCount
        self.maxBytes = maxBytes
    }

    var count: Int { state.withLock { $0.byID.count } }

    /// Nil when storing it would pass the count or byte limit.
    func create(sender: String, recipient: String, content: Content, now: Int64) -> Notification? {
        // Unguessable ids: the seed's sequential integers let anyone walk the store.
        let id = UUIDText.unguessable(upper: false)
        let notification = Notification(
            id: id, sender: sender, recipient: recipient, content: content, read: false, expiresAt: now + ttl.nanosecondCount
        )
        let size = content.byteCount
        return state.withLock { state in
            // A few expired ones go with every store, so a steady stream never leaves a large
            // sweep for later.
            _ = state.dropExpired(now: now, limit: 4)
            guard state.byID.count < maxCount, state.bytes <= maxBytes - size else { return nil }
            state.byID[id] = notification
            state.bytes += size
            state.queue.append((id, notification.expiresAt))
            return notification
        }
    }

    /// The notification if `reader` is its recipient, marking it read. Anyone else gets nil, the
    /// same answer as for an id that does not exist, so existence does not leak.
    func read(id: String, reader: String, now: Int64) -> Notification? {
        state.withLock { state in
            guard var notification = state.byID[id], notification.expiresAt > now else {
                state.remove(id)
                return nil
            }
            guard notification.recipient == reader else { return nil }
            let result = notification
            notification.read = true
            state.byID[id] = notification
            return result
        }
    }

    func remove(id: String) {
        state.withLock { $0.remove(id) }
    }

    /// Drops what expired by `now`, oldest first, in slices that let readers and writers in
    /// between: the reference backend's fetches wait on this lock on an event loop, and a sweep of
    /// a large store in one hold stalled the loop (a 2,000 sends/s soak dropped sends every 30 s).
    /// The queue's order is the expiry order, so a sweep reads only what it drops.
    @discardableResult
    func sweep(now: Int64) -> Int {
        var total = 0
        while true {
            let (dropped, more) = state.withLock { $0.dropExpired(now: now, limit: 1024) }
            total += dropped
            guard more else { return total }
        }
    }
}
