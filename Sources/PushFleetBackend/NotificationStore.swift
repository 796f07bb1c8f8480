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

        mutating func remove(_ id: String) {
            if let gone = byID.removeValue(forKey: id) { bytes -= gone.content.byteCount }
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
            guard state.byID.count < maxCount, state.bytes <= maxBytes - size else { return nil }
            state.byID[id] = notification
            state.bytes += size
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

    @discardableResult
    func sweep(now: Int64) -> Int {
        state.withLock { state in
            let expired = ExpirySweep.expired(in: state.byID, now: now) { $0.expiresAt }
            for id in expired { state.remove(id) }
            return expired.count
        }
    }
}
