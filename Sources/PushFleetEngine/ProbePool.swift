import Synchronization

/// Recently seen secure ids and their recipients, for leak probes to try as someone else.
final class ProbePool: Sendable {
    private let entries = Mutex<(items: [(id: String, user: Int)], next: Int)>(([], 0))
    private static let capacity = 1024

    func add(id: String, user: Int) {
        entries.withLock { state in
            if state.items.count < Self.capacity {
                state.items.append((id, user))
            } else {
                state.items[state.next] = (id, user)
                state.next = (state.next + 1) % Self.capacity
            }
        }
    }

    /// A stored id that belongs to someone other than `user`.
    func foreign(to user: Int, pick: UInt64) -> String? {
        entries.withLock { state in
            let others = state.items.filter { $0.user != user }
            return others.isEmpty ? nil : others[Int(pick % UInt64(others.count))].id
        }
    }
}
