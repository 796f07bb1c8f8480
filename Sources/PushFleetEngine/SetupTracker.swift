import NIOCore
import Synchronization
import PushFleetClients
import PushFleetMetrics

/// Counts devices that finished setting up (ready or failed), so traffic starts once the
/// whole fleet is in, and admits arrivals while at most `limit` devices set up at once.
///
/// A fleet arriving faster than the target sets devices up would otherwise start a task per
/// arrival and park it in the HTTP client's queue: a million-device ramp once held 350,000 of
/// them. Past the limit an arrival waits as a place in the arrival order instead, and its setup
/// is still measured from its intended arrival (`setup`, corrected).
final class SetupTracker: Sendable {
    private struct State {
        var remaining: Int
        var inFlight = 0
        var released = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        var admissions = CircularBuffer<CheckedContinuation<Bool, Never>>()
    }

    /// Setups in flight at once, at most.
    let limit: Int
    private let state: Mutex<State>

    init(total: Int, limit: Int) {
        self.limit = max(1, limit)
        state = Mutex(State(remaining: total))
    }

    /// How an arrival was let in.
    enum Admission: Equatable {
        case admitted(waited: Bool)
        case stopping
    }

    /// Waits until a device may start setting up.
    func admit() async -> Admission {
        if let now = state.withLock({ Self.tryAdmit(&$0, limit: limit) }) { return now ? .admitted(waited: false) : .stopping }
        let admitted = await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                let now = Self.tryAdmit(&state, limit: limit)
                if now == nil { state.admissions.append(continuation) }
                return now
            }
            if let now { continuation.resume(returning: now) }
        }
        return admitted ? .admitted(waited: true) : .stopping
    }

    /// True: admitted; false: stopping; nil: no slot free.
    private static func tryAdmit(_ state: inout State, limit: Int) -> Bool? {
        if state.released { return false }
        guard state.inFlight < limit else { return nil }
        state.inFlight += 1
        return true
    }

    /// Whether an arrival would wait for a slot now.
    var atLimit: Bool { state.withLock { $0.inFlight >= limit } }

    func finished() {
        let (waiters, next): ([CheckedContinuation<Void, Never>], CheckedContinuation<Bool, Never>?) = state.withLock { state in
            state.remaining -= 1
            // The slot passes straight to the next arrival waiting for one.
            let next = state.admissions.isEmpty ? nil : state.admissions.removeFirst()
            if next == nil { state.inFlight = max(0, state.inFlight - 1) }
            guard state.remaining <= 0 else { return ([], next) }
            defer { state.waiters = [] }
            return (state.waiters, next)
        }
        next?.resume(returning: true)
        for waiter in waiters { waiter.resume() }
    }

    /// Marks every device not yet counted as finished (the run is stopping).
    func releaseAll() {
        let (waiters, admissions): ([CheckedContinuation<Void, Never>], CircularBuffer<CheckedContinuation<Bool, Never>>) = state.withLock { state in
            state.remaining = 0
            state.released = true
            defer {
                state.waiters = []
                state.admissions = []
            }
            return (state.waiters, state.admissions)
        }
        for admission in admissions { admission.resume(returning: false) }
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
