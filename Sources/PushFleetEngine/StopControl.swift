import Synchronization

/// How a run is asked to end early: the first request stops arrivals and sends and lets work in
/// flight finish (bounded by the deadline); the second skips the rest. Either way the reports
/// are written, marked aborted.
///
/// The one place a stop request is held, shared by every run it is given (a capacity search's
/// steps): the engine reads ``isRequested`` without a lock, waits with ``reached(_:)``, and
/// interrupts or cancels the tasks that make new work; nothing polls.
public final class StopControl: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case running, stopping, aborting

        public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    }

    private struct State {
        var level: Level = .running
        var reason: String?
        var waiters: [(id: UInt64, level: Level, continuation: CheckedContinuation<Void, Never>)] = []
        var nextID: UInt64 = 0
        /// Waiters cancelled before they were registered.
        var cancelled: Set<UInt64> = []
    }

    private let state = Mutex(State())
    /// Set on the first request, read without the lock on every decision to start work.
    private let requested = Atomic<Bool>(false)

    public init() {}

    /// Whether a stop was requested.
    var isRequested: Bool { requested.load(ordering: .relaxed) }

    public var level: Level { state.withLock { $0.level } }
    public var reason: String? { state.withLock { $0.reason } }

    /// Escalates one level per call.
    @discardableResult
    public func escalate(reason: String) -> Level {
        let (level, woken): (Level, [CheckedContinuation<Void, Never>]) = state.withLock { state in
            state.level = state.level == .running ? .stopping : .aborting
            if state.reason == nil { state.reason = reason }
            let level = state.level
            requested.store(true, ordering: .relaxed)
            let woken = state.waiters.filter { $0.level <= level }.map(\.continuation)
            state.waiters.removeAll { $0.level <= level }
            return (level, woken)
        }
        for continuation in woken { continuation.resume() }
        return level
    }

    /// Returns once the level is at least `level`, or when the task is cancelled.
    func reached(_ level: Level) async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state in
                    if state.level >= level || state.cancelled.remove(id) != nil { return true }
                    state.waiters.append((id, level, continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume()
        }
        state.withLock { _ = $0.cancelled.remove(id) }
    }
}
