import Synchronization

/// The one clock a run reads: every instant a run records and every wait it makes goes through
/// it, so a test can play a fleet on a ``ManualRunClock`` and say exactly when things happen.
///
/// Instants are nanoseconds on a monotonic time line; `wallNow` only names when the run happened.
public protocol RunClock: Sendable {
    /// The current monotonic instant, in nanoseconds.
    func now() -> Int64
    /// Wall-clock nanoseconds since the Unix epoch.
    func wallNow() -> Int64
    /// Returns at or after `instant`; throws `CancellationError` when the task is cancelled first.
    func sleep(until instant: Int64) async throws
}

/// The machine's monotonic and wall clocks.
public struct SystemRunClock: RunClock {
    public init() {}

    public func now() -> Int64 { MonotonicClock.nanoseconds() }

    public func wallNow() -> Int64 { WallClock.nanoseconds() }

    public func sleep(until instant: Int64) async throws {
        let remaining = instant - now()
        if remaining > 0 { try await Task.sleep(for: .nanoseconds(remaining)) } else { try Task.checkCancellation() }
    }
}

/// Instants another process gives (the push service's, on the wall clock) moved onto a run's
/// clock: shifted by `offset` (the run's clock less the wall clock), then held between the run's
/// start and now — an instant from outside is range-checked where it enters, so a clock far off,
/// or a report that claims the end of time, cannot reach the run's per-second tables.
public enum ForeignInstant {
    public static func onRunClock(wall: Int64, offset: Int64, start: Int64, now: Int64) -> Int64 {
        min(max(Saturating.add(wall, offset), start), max(start, now))
    }
}

extension RunClock where Self == SystemRunClock {
    public static var system: SystemRunClock { SystemRunClock() }
}

/// A clock that moves only when told (``advance(by:)``, ``advance(to:)``); sleepers wake, in
/// order of their instants, when it reaches them.
public final class ManualRunClock: RunClock {
    private struct Sleeper {
        var id: UInt64
        var instant: Int64
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Int64
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        /// Sleepers cancelled before they were registered.
        var cancelled: Set<UInt64> = []
    }

    private let state: Mutex<State>
    /// The wall time at instant zero.
    private let wallOrigin: Int64

    /// - Parameters:
    ///   - start: the first instant.
    ///   - wallOrigin: wall-clock nanoseconds that instant 0 stands for.
    public init(start: Int64 = 0, wallOrigin: Int64 = 1_800_000_000_000_000_000) {
        state = Mutex(State(now: start))
        self.wallOrigin = wallOrigin
    }

    public func now() -> Int64 { state.withLock { $0.now } }

    public func wallNow() -> Int64 { wallOrigin + now() }

    /// How many tasks are waiting on this clock.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// The earliest instant a sleeper waits for, if any.
    public var nextWake: Int64? { state.withLock { $0.sleepers.map(\.instant).min() } }

    public func sleep(until instant: Int64) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case wait, ready, cancelled }
                let outcome: Outcome = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return .cancelled }
                    if instant <= state.now { return .ready }
                    state.sleepers.append(Sleeper(id: id, instant: instant, continuation: continuation))
                    return .wait
                }
                switch outcome {
                case .wait: break
                case .ready: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let sleeper: Sleeper? = state.withLock { state in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
        // A sleeper that woke normally may have left its id among the cancelled ones.
        state.withLock { _ = $0.cancelled.remove(id) }
    }

    /// Moves the clock forward and wakes every sleeper whose instant has come, earliest first.
    public func advance(by nanoseconds: Int64) {
        advance(to: now() + max(0, nanoseconds))
    }

    public func advance(to instant: Int64) {
        let due: [Sleeper] = state.withLock { state in
            state.now = max(state.now, instant)
            let now = state.now
            let due = state.sleepers.filter { $0.instant <= now }.sorted { ($0.instant, $0.id) < ($1.instant, $1.id) }
            state.sleepers.removeAll { $0.instant <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}
