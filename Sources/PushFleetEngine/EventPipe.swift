import NIOPosix
import PushFleetMetrics
import Synchronization

/// Carries devices' and senders' events to the recorder, in the order they were accepted.
///
/// Emitters append under a short lock. The emitter that finds nobody applying takes everything
/// waiting and applies it as one batch under the recorder's lock (flat combining): a burst costs
/// one recorder lock per batch, and no thread is woken to apply an event — waking a consumer
/// task cost more than the event itself. The consumer task (``consume(into:)``) is the backstop:
/// it takes over what an emitter left (after ``rounds`` batches), folds when an event loop's
/// thread found a fold due (the loop must not stall on one, nor on the event tape's file), and
/// applies what remains at the end. Nothing is queued past ``finish()``.
final class EventPipe: Sendable {
    private struct State {
        var pending: [RunEvent] = []
        /// Set once the consumer runs: until then, events wait for it.
        var recorder: Recorder?
        /// Someone is applying a batch: the others only append.
        var applying = false
        /// The consumer, waiting for work left to it or for the end.
        var waiter: CheckedContinuation<Void, Never>?
        var finished = false
        /// Events accepted so far.
        var emitted = 0
        /// When the oldest event waiting was accepted, on the run's clock.
        var oldestAt: Int64?
        /// The longest an event waited before it was taken to be applied.
        var longestLag: Int64 = 0
        /// An emptied batch array, kept for the next batch.
        var spare: [RunEvent] = []
        /// An event loop's thread found a fold due: the consumer folds.
        var foldDue = false

        /// Takes what waits, as the one applying; clears `applying` when there is nothing.
        mutating func take(at now: Int64) -> [RunEvent]? {
            guard !pending.isEmpty else {
                applying = false
                return nil
            }
            if let oldest = oldestAt { longestLag = max(longestLag, now - oldest) }
            oldestAt = nil
            var batch = spare
            spare = []
            swap(&batch, &pending)
            return batch
        }

        /// Gives a batch array back once applied; a burst's capacity is not kept for the run.
        mutating func recycle(_ batch: inout [RunEvent]) {
            guard batch.capacity <= EventPipe.retainedCapacity else { return }
            batch.removeAll(keepingCapacity: true)
            if spare.capacity < batch.capacity { swap(&spare, &batch) }
        }
    }

    private let now: @Sendable () -> Int64

    init(now: @escaping @Sendable () -> Int64) {
        self.now = now
    }

    private let state = Mutex(State())
    /// Poked each time the recorder has caught up (nothing waits to be applied): the drain waits
    /// for it rather than looking again and again.
    let drainSignal = DrainSignal()
    /// The most events a batch array keeps room for between batches.
    private static let retainedCapacity = 4_096
    /// Batches an emitter applies before it leaves the rest to the consumer, so that one
    /// device's task is not held applying everybody's events through a burst.
    static let rounds = 4

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
        let recorder: Recorder? = state.withLock { state in
            guard !state.finished else { return nil }
            if state.pending.isEmpty { state.oldestAt = now() }
            state.pending.append(event)
            state.emitted += 1
            guard let recorder = state.recorder, !state.applying else { return nil }
            state.applying = true
            return recorder
        }
        guard let recorder else { return }
        let onEventLoop = MultiThreadedEventLoopGroup.currentEventLoop != nil
        if onEventLoop && recorder.writesTape {
            handOver()
        } else {
            apply(into: recorder, rounds: Self.rounds, mayFold: !onEventLoop)
        }
    }

    /// No event is accepted after this; the consumer ends once what was in has been applied.
    func finish() {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// As the one applying: applies up to `rounds` batches, then leaves what is left (and the
    /// end, if it came) to the consumer.
    private func apply(into recorder: Recorder, rounds: Int, mayFold: Bool = true) {
        var foldDue = false
        for _ in 0..<rounds {
            let taken = now()
            guard var batch = state.withLock({ $0.take(at: taken) }) else { return stopped(foldDue: foldDue) }
            if recorder.apply(batch, mayFold: mayFold) { foldDue = true }
            state.withLock { $0.recycle(&batch) }
        }
        handOver(foldDue: foldDue)
    }

    /// Stops applying and wakes the consumer to go on.
    private func handOver(foldDue: Bool = false) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.applying = false
            if foldDue { state.foldDue = true }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Nothing was left to apply: the consumer is woken only for a fold or the end.
    private func stopped(foldDue: Bool) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            if foldDue { state.foldDue = true }
            guard state.finished || state.foldDue else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
        drainSignal.poke()
    }

    /// Applies events to `recorder` until the pipe is finished and empty: what came before it
    /// started, what emitters left to it, and the rest at the end.
    func consume(into recorder: Recorder) async {
        state.withLock { $0.recorder = recorder }
        while true {
            enum Next { case apply, fold, wait, done }
            let next: Next = state.withLock { state in
                if state.applying { return .wait }
                if !state.pending.isEmpty {
                    state.applying = true
                    return .apply
                }
                if state.foldDue {
                    state.foldDue = false
                    state.applying = true
                    return .fold
                }
                return state.finished ? .done : .wait
            }
            switch next {
            case .done:
                return
            case .apply:
                apply(into: recorder, rounds: .max)
            case .fold:
                recorder.foldIfDue()
                handOver()
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ready = state.withLock { state in
                        // Work left by an emitter, a fold, or the end with nobody applying: go on now.
                        if !state.applying && (!state.pending.isEmpty || state.foldDue || state.finished) { return true }
                        state.waiter = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            }
        }
    }
}
