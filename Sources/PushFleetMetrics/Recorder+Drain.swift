import PushFleetCore
import PushFleetLedger
import Synchronization

extension Recorder {
    /// What a run's drain asks of the recorder, under one lock: how many events it has applied,
    /// and how many expected pairs it still awaits (nil when the ledger cannot tell).
    package func settlement() -> (applied: Int, awaited: Int?) {
        state.withLock { ($0.applied, $0.ledger.awaited) }
    }

    /// The pairs that would be lost if the ledger were judged now, once it holds all `emitted`
    /// events; nil while some are still to be applied.
    package func lost(ifApplied emitted: Int, deadline: Duration) -> Int? {
        state.withLock { state in
            state.applied == emitted ? state.ledger.verdict(deadline: deadline, incidentLimit: 0).total.lost : nil
        }
    }
}
