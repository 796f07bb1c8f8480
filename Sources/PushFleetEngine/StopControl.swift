import Synchronization
import PushFleetClients
import PushFleetMetrics

/// How a run is asked to end early: the first request stops arrivals and sends and lets work in
/// flight finish (bounded by the deadline); the second skips the rest. Either way the reports
/// are written, marked aborted.
public final class StopControl: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case running, stopping, aborting

        public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    }

    private let state = Mutex<(level: Level, reason: String?)>((.running, nil))

    public init() {}

    public var level: Level { state.withLock { $0.level } }
    public var reason: String? { state.withLock { $0.reason } }

    /// Escalates one level per call.
    @discardableResult
    public func escalate(reason: String) -> Level {
        state.withLock { state in
            state.level = state.level == .running ? .stopping : .aborting
            if state.reason == nil { state.reason = reason }
            return state.level
        }
    }
}
