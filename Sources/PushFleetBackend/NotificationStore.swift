import Foundation
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

    private let state = Mutex<[String: Notification]>([:])
    let ttl: Duration

    init(ttl: Duration) {
        self.ttl = ttl
    }

    var count: Int { state.withLock { $0.count } }

    func create(sender: String, recipient: String, content: Content, now: Int64) -> Notification {
        // Unguessable ids: the seed's sequential integers let anyone walk the store.
        let id = UUID().uuidString.lowercased()
        let notification = Notification(
            id: id, sender: sender, recipient: recipient, content: content, read: false, expiresAt: now + ttl.nanosecondCount
        )
        state.withLock { $0[id] = notification }
        return notification
    }

    /// The notification if `reader` is its recipient, marking it read. Anyone else gets nil, the
    /// same answer as for an id that does not exist, so existence does not leak.
    func read(id: String, reader: String, now: Int64) -> Notification? {
        state.withLock { store in
            guard var notification = store[id], notification.expiresAt > now else {
                store[id] = nil
                return nil
            }
            guard notification.recipient == reader else { return nil }
            let result = notification
            notification.read = true
            store[id] = notification
            return result
        }
    }

    func remove(id: String) {
        _ = state.withLock { $0.removeValue(forKey: id) }
    }

    @discardableResult
    func sweep(now: Int64) -> Int {
        state.withLock { store in
            let before = store.count
            store = store.filter { $0.value.expiresAt > now }
            return before - store.count
        }
    }
}
