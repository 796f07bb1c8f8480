import Synchronization

/// Wakes a run's drain when something it waits on may have changed: a device finished handling
/// the last push in hand, or the recorder caught up with the events emitted. The drain reads
/// ``pokes`` before it looks, and waits only for a poke after that, so none is missed between
/// its look and its wait. A poke costs one atomic load unless the drain is waiting.
final class DrainSignal: Sendable {
    private struct State {
        var pokes: UInt64 = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    /// The drain may be waiting: only then do pokes take the lock.
    private let armed = Atomic<Bool>(false)

    var pokes: UInt64 { state.withLock { $0.pokes } }

    func poke() {
        guard armed.load(ordering: .acquiring) else { return }
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.pokes &+= 1
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Pokes from now on are counted; before, nobody waits for them.
    func arm() {
        armed.store(true, ordering: .releasing)
    }

    /// Returns at the first poke after `seen` (at once if there was one), or when the task is
    /// cancelled.
    func wait(after seen: UInt64) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.pokes != seen || Task.isCancelled { return true }
                    state.waiter?.resume()
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
