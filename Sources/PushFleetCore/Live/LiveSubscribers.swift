/// Who watches the live page, as a state machine without sockets: each subscriber gets what is
/// published after it joined through a queue of its own, at most ``capacity`` messages not yet
/// written to it; one whose queue is full is dropped (its stream ends, and a browser reconnects
/// and starts again from the history), so a slow browser never holds up the run or the others.
/// A joiner gets the opening message, the history (the last ``historyLimit`` messages) and the
/// closing one if the run has ended.
public struct LiveSubscribers<Message: Sendable>: Sendable {
    public let capacity: Int
    public let historyLimit: Int
    /// Said first to every subscriber (what the run is).
    public private(set) var opening: Message?
    /// Said last, once the run has ended (its verdict).
    public private(set) var closing: Message?
    private var history: [Message] = []
    private var historyStart = 0
    private var pending: [Int: Int] = [:]
    private var nextID = 0

    public enum Action: Sendable {
        case write(subscriber: Int, Message)
        /// Its queue is full: end its stream.
        case drop(subscriber: Int)
        /// The run has ended and this is said: end its stream once written.
        case finish(subscriber: Int)
    }

    public init(capacity: Int = 64, historyLimit: Int = 3600) {
        self.capacity = max(1, capacity)
        self.historyLimit = max(0, historyLimit)
    }

    public var subscribers: Int { pending.count }

    /// A new subscriber's id and what to write to it first. A subscriber joining after the end
    /// is told everything and finished.
    public mutating func join() -> (id: Int, backlog: [Message], finished: Bool) {
        let id = nextID
        nextID += 1
        var backlog: [Message] = opening.map { [$0] } ?? []
        backlog += history[historyStart...]
        if let closing {
            backlog.append(closing)
            return (id, backlog, true)
        }
        pending[id] = 0
        return (id, backlog, false)
    }

    /// The subscriber went away (its connection closed).
    public mutating func leave(_ id: Int) {
        pending[id] = nil
    }

    /// One of its queued messages was written.
    public mutating func written(_ id: Int) {
        if let count = pending[id] { pending[id] = max(0, count - 1) }
    }

    /// The opening message; subscribers that joined before it (a followed run whose shards had
    /// not yet said what they play) are told it now.
    public mutating func open(_ message: Message) -> [Action] {
        opening = message
        return pending.keys.sorted().map { .write(subscriber: $0, message) }
    }

    /// A message for every subscriber, kept in the history.
    public mutating func publish(_ message: Message) -> [Action] {
        if historyLimit > 0 {
            history.append(message)
            if history.count - historyStart > historyLimit { historyStart += 1 }
            // Compact now and then rather than shifting on every message.
            if historyStart >= historyLimit {
                history.removeFirst(historyStart)
                historyStart = 0
            }
        }
        var actions: [Action] = []
        for (id, count) in pending.sorted(by: { $0.key < $1.key }) {
            if count >= capacity {
                pending[id] = nil
                actions.append(.drop(subscriber: id))
            } else {
                pending[id] = count + 1
                actions.append(.write(subscriber: id, message))
            }
        }
        return actions
    }

    /// The last message: every subscriber gets it (a full queue too: it is the verdict) and is
    /// finished; later joiners get it after the history.
    public mutating func close(_ message: Message) -> [Action] {
        closing = message
        let ids = pending.keys.sorted()
        pending = [:]
        return ids.flatMap { [Action.write(subscriber: $0, message), .finish(subscriber: $0)] }
    }
}
