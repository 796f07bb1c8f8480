import PushFleetCore
import PushFleetMetrics
import Synchronization

/// What the run's tasks tell each other while it plays: its events, its stop, and the counts the
/// drain and the senders read.
final class RunSignals: Sendable {
    private let events: EventPipe
    /// The stop request, shared with whoever may ask (and with a search's other steps).
    let stop: StopControl
    /// Set when the run ends on its own: work in flight finishes, nothing new starts.
    private let ending = Atomic<Bool>(false)
    /// Stored ids seen, for leak probes.
    let probes = ProbePool()
    private let nextSend = Atomic<Int>(0)
    /// Numbers the requests made outside a send, each the start of its own trace.
    private let nextTracedRequest = Atomic<Int>(0)
    /// Pushes that arrived and are still being handled (fetching their content).
    let pushesInHand = Atomic<Int>(0)
    /// When the last push arrived.
    let lastPushArrival = Atomic<Int64>(0)
    /// Set once a device was refused at the push service's device cap (marked once per run).
    private let deviceCapMarked = Atomic<Bool>(false)
    let trafficStart = Atomic<Int64>(0)

    init(events: EventPipe, stop: StopControl) {
        self.events = events
        self.stop = stop
    }

    func emit(_ event: RunEvent) {
        events.emit(event)
    }

    /// Events handed to the recorder so far (the drain waits until it has applied them all).
    var emitted: Int { events.emitted }

    /// No new work: a stop was requested or the run is ending.
    var isStopping: Bool { stop.isRequested || ending.load(ordering: .relaxed) }

    /// The run is ending on its own. Not a stop request: the run is not marked aborted.
    func runEnding() {
        ending.store(true, ordering: .relaxed)
    }

    /// A push reached a device; ``pushHandled()`` follows once its handling has emitted its
    /// receipt.
    func pushArrived(at time: Int64) {
        pushesInHand.add(1, ordering: .relaxed)
        lastPushArrival.store(time, ordering: .relaxed)
    }

    func pushHandled() {
        if pushesInHand.subtract(1, ordering: .relaxed).newValue == 0 { events.drainSignal.poke() }
    }

    /// Marks the run, once, with the cap the push service refused a device at.
    func markDeviceCap(_ cap: Int, at instant: Int64) {
        guard !deviceCapMarked.exchange(true, ordering: .relaxed) else { return }
        emit(.marker(ErrorClass.deviceCapMarker(cap), at: instant))
    }

    /// The number of a request that starts its own trace (a device's login, register, fetch).
    func makeTracedRequest() -> Int {
        nextTracedRequest.add(1, ordering: .relaxed).newValue
    }

    /// The next send's id, in `shard`'s share of the ids.
    func makeSendID(_ shard: Shard) -> Int {
        shard.sendID(nextSend.add(1, ordering: .relaxed).newValue)
    }
}
