import Synchronization
import PushFleetClients
import PushFleetMetrics

/// Counts devices that finished setting up (ready or failed), so traffic starts once the
/// whole fleet is in.
final class SetupTracker: Sendable {
    private struct State {
        var remaining: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(total: Int) {
        state = Mutex(State(remaining: total))
    }

    func finished() {
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.remaining -= 1
            guard state.remaining <= 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Marks every device not yet counted as finished (the run is stopping).
    func releaseAll() {
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.remaining = 0
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func waitForAll() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.remaining <= 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
