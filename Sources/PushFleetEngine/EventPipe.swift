import PushFleetMetrics
import Synchronization

/// Carries devices' and senders' events to the one task that applies them to the recorder.
///
/// Emitters append under a short lock; the consumer takes everything waiting at once and
/// applies it as one batch under the recorder's lock, so a burst of pushes costs one recorder
/// lock per batch rather than one per event. Nothing is queued past ``finish()``.
final class EventPipe: Sendable {
    private struct State {
        var pending: [RunEvent] = []
        var waiter: CheckedContinuation<Void, Never>?
        var finished = false
        /// Events accepted so far.
        var emitted = 0
        /// When the oldest event waiting was accepted, on the run's clock.
        var oldestAt: Int64?
        /// The longest an event waited before the consumer took it.
        var longestLag: Int64 = 0
    }

    private let now: @Sendable () -> Int64

    init(now: @escaping @Sendable () -> Int64) {
        self.now = now
    }

    private let state = Mutex(State())
    /// The most events a batch array keeps room for between batches.
    private static let retainedCapacity = 4_096

    /// Events accepted so far (the drain waits until the recorder has applied them all).
    var emitted: Int { state.withLock { $0.emitted } }

    /// The longest an event waited for the recorder since the last ``resetLag()``: how far the
    /// recorder fell behind.
    var longestLag: Int64 { state.withLock { $0.longestLag } }

    /// Starts measuring the lag afresh (at the start of traffic: arrivals are not the senders').
    func resetLag() {
        state.withLock { $0.longestLag = 0 }
    }

    func emit(_ event: RunEvent) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            guard !state.finished else { return nil }
            if state.pending.isEmpty { state.oldestAt = now() }
            state.pending.append(event)
            state.emitted += 1
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// No event is accepted after this; the consumer ends once it has applied what was in.
    func finish() {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Applies batches to `recorder` until the pipe is finished and empty.
    func consume(into recorder: Recorder) async {
        var batch: [RunEvent] = []
        batch.reserveCapacity(256)
        while true {
            let taken = now()
            let finished: Bool = state.withLock { state in
                swap(&batch, &state.pending)
                if let oldest = state.oldestAt, !batch.isEmpty { state.longestLag = max(state.longestLag, taken - oldest) }
                state.oldestAt = nil
                return state.finished
            }
            if !batch.isEmpty {
                recorder.apply(batch)
                // A burst's capacity is not kept for the rest of the run.
                if batch.capacity > Self.retainedCapacity {
                    batch = []
                    batch.reserveCapacity(256)
                } else {
                    batch.removeAll(keepingCapacity: true)
                }
                continue
            }
            if finished { return }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state in
                    if !state.pending.isEmpty || state.finished { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }
}
