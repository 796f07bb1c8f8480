import PushFleetWire
import Synchronization

/// The backend's counters, shared by the routes and the push sender.
final class BackendCounters: Sendable {
    private let stats = Mutex(BackendStats())

    func update(_ body: (inout BackendStats) -> Void) {
        stats.withLock { body(&$0) }
    }

    var snapshot: BackendStats { stats.withLock { $0 } }
}
