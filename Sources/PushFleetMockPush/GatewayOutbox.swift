import PushFleetWire

/// What a gateway connection has still to write, and whether a write of it is due on the
/// connection's event loop: pushes handed over while one write is due join it, so a burst for a
/// multiplexed connection costs one hop to its loop and one flush.
struct GatewayOutbox {
    enum Item: Sendable {
        case text(String)
        /// A push, encoded when it is written (the frame then says when).
        case push(PushFrame)
        /// Close a single-device connection (forced disconnect); nothing after it is written.
        case close(reason: String)
    }

    private(set) var pending: [Item] = []
    /// A write is due on the loop and will take what is pending.
    private var due = false
    /// Closed, or the connection ended: nothing more is taken.
    private var finished = false

    /// Adds an item to write; true when the caller must have a write done on the loop (none is
    /// due yet).
    mutating func add(_ item: Item) -> Bool {
        guard !finished else { return false }
        pending.append(item)
        guard !due else { return false }
        due = true
        return true
    }

    /// What the due write takes: everything pending, up to and including a close.
    mutating func take() -> [Item] {
        due = false
        guard !finished else { return [] }
        var taken = pending
        pending = []
        if let close = taken.firstIndex(where: \.isClose) {
            taken.removeSubrange(taken.index(after: close)...)
            finished = true
        }
        return taken
    }

    /// The connection ended: what was never taken stays unwritten.
    mutating func finish() -> [Item] {
        finished = true
        defer { pending = [] }
        return pending
    }
}

extension GatewayOutbox.Item {
    var isClose: Bool {
        if case .close = self { true } else { false }
    }
}
