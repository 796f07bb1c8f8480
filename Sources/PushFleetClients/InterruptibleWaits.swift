package import NIOCore
import Synchronization

/// One task's waits on a loop's timer, one at a time, that another task can end: ``interrupt()``
/// ends the wait under way at once and every later one before it begins. A sender paces its sends
/// with it, so a stop request ends its wait without cancelling the task, whose requests in flight
/// are left to finish; no task is made per wait.
package final class InterruptibleWaits: Sendable {
    private struct State {
        var interrupted = false
        var current: TimerWait?
    }

    private let state = Mutex(State())

    package init() {}

    package var isInterrupted: Bool { state.withLock { $0.interrupted } }

    /// Waits `nanoseconds` on `loop`'s timer; false when interrupted (before or during the wait)
    /// or when the task is cancelled.
    package func sleep(for nanoseconds: Int64, on loop: any EventLoop) async -> Bool {
        let wait = TimerWait()
        let begun = state.withLock { state in
            guard !state.interrupted else { return false }
            state.current = wait
            return true
        }
        guard begun else { return false }
        defer { state.withLock { if $0.current === wait { $0.current = nil } } }
        do {
            try await wait.wait(for: nanoseconds, on: loop)
            return true
        } catch {
            return false
        }
    }

    /// Ends the wait under way, and every later one before it begins.
    package func interrupt() {
        let current = state.withLock { state in
            state.interrupted = true
            defer { state.current = nil }
            return state.current
        }
        current?.cancel()
    }
}
