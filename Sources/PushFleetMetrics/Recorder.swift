import Prometheus
package import PushFleetLedger
import PushFleetResults
package import PushFleetCore
package import Synchronization

/// What devices and senders report. Emitted from anywhere; consumed by one ``Recorder`` task,
/// so histograms and the ledger are never locked on the hot path.
package enum RunEvent: Sendable {
    /// A closed operation (login, register, connect, fetch) and its latency; `failed` when the
    /// answer was an error status.
    case operation(metric: String, nanoseconds: Int64, failed: Bool, at: Int64)
    case error(ErrorClass, at: Int64)
    case deviceReady(Int, at: Int64)
    case deviceFailed(Int, at: Int64)
    /// A registration change made by a request from `since` to `at`.
    case eligibility(device: Int, eligible: Bool, since: Int64, at: Int64)
    case send(DeliveryLedger.Send)
    case sendDropped(at: Int64)
    /// A sender woke `lag` after a send's intended start: the fleet fell behind its schedule.
    case senderLate(lag: Int64)
    /// A push received; `push` is the push service's number for it, when it gave one.
    case receipt(DeliveryLedger.Receipt, push: UInt64?)
    /// What the push service reported of the run's pushes, its times on the run's clock.
    case pushReport(PushReport)
    /// How much of the push service the run can see (set once the watch is in force, or not).
    case pushServiceView(DeliveryLedger.PushServiceView)
    /// The push service's reports may be missing in this span.
    case pushServiceGap(Range<Int64>)
    /// A push the push service refused for the device's token, as the device was told.
    case rejection(DeliveryLedger.Rejection)
    case probeLeak(DeliveryLedger.ProbeLeak)
    case marker(String, at: Int64)
}

/// A snapshot for the live progress line.
package struct LiveCounts: Sendable {
    package var devicesReady = 0
    package var devicesFailed = 0
    package var sends = 0
    package var sendFailures = 0
    package var sendsDropped = 0
    /// Sends that started more than 10 ms after their intended start (the sender fell behind).
    package var sendsLateStart = 0
    package var received = 0
    package var errors = 0
    package var sendP99: Int64 = 0
}

/// Owns the histograms, counters, per-second buckets and the delivery ledger of one run.
package final class Recorder: Sendable {
    struct SecondBucket {
        var devicesReady = 0
        var sends = 0
        var sendFailures = 0
        var sendsDropped = 0
        var received = 0
        var errors = 0
        var errorsByClass: [String: Int] = [:]
    }

    package struct State {
        package var ledger: DeliveryLedger
        var closed: [String: LatencyHistogram] = [:]
        var failures: [String: Int] = [:]
        var sendCorrected = LatencyHistogram()
        var sendRaw = LatencyHistogram()
        var errors: [String: (count: Int, first: Int64, last: Int64)] = [:]
        var seconds: [SecondBucket] = []
        var markers: [(Int64, String)] = []
        var live = LiveCounts()
        /// Sends whose sender woke late, and the longest lag.
        var lateWakes = 0
        var longestWakeLag: Int64 = 0
        /// Sends that got no answer (timed out, connection failed): a hung target.
        var unanswered = 0
        /// When each dropped send was due, so a window counts its own.
        var dropsDue: [Int64] = []
        /// Events applied so far.
        package var applied = 0
        /// The latest instant an applied receipt, send or refusal carried, and when to fold next.
        var latest = Int64.min
        var nextFold = Int64.min
        /// The deliveries of folded sends, summarised.
        var folded = DeliveryDigest()

        /// The folded deliveries with the verdict's own, when the run folded; nil when every
        /// delivery is still in the verdict (the exact tables are built from it then).
        func digest(with verdict: DeliveryLedger.Verdict, user: (Int) -> Int, second: (Int64) -> Int) -> DeliveryDigest? {
            guard verdict.foldedDeliveries > 0 else { return nil }
            var digest = folded
            digest.add(verdict.deliveries, user: user, second: second)
            return digest
        }
    }

    /// When and how a run judges settled sends as it goes (``DeliveryLedger/fold(now:deadline:incidentLimit:)``).
    package struct Folding: Sendable {
        package var deadline: Duration
        /// Folds at most this often, by the run's clock.
        package var every: Duration
        /// Events may be applied this much after their instant (a batch waiting for the
        /// recorder): folding stays this far behind the latest one.
        package var slack: Duration

        package init(deadline: Duration, horizon: Duration) {
            self.deadline = deadline
            every = max(.seconds(1), horizon / 10)
            slack = min(.seconds(10), horizon)
        }
    }

    package let start: Int64
    package let state: Mutex<State>
    let metrics: LiveMetrics?
    /// Where every applied event is also written (a shard's raw material), if anywhere.
    package let tape: EventTapeWriter?
    /// Folding, when the run folds (not a shard's, whose material only the merge judges, and not
    /// a run judged in windows).
    let folding: Folding?

    /// `shard`: the part of the run whose sends this recorder holds (their ids are spaced by it).
    /// `horizon`: the ledger's (``DeliveryLedger/horizon``); `folding`: whether and how the run
    /// folds settled sends.
    package init(
        users: Int, start: Int64, metrics: LiveMetrics? = nil, tape: EventTapeWriter? = nil, shard: Shard = .whole, horizon: Duration? = nil,
        folding: Folding? = nil
    ) {
        self.start = start
        self.metrics = metrics
        self.tape = tape
        self.folding = horizon == nil ? nil : folding
        var ledger = DeliveryLedger(users: users, sendStride: shard.count, offset: shard.index)
        ledger.horizon = horizon
        self.state = Mutex(State(ledger: ledger))
    }

    package func addDevice(_ device: DeliveryLedger.Device) {
        state.withLock { _ = $0.ledger.addDevice(device) }
    }

    /// How the ledger reads received pushes (the scenario's layouts and the run's id).
    package func setPushReader(_ reader: DeliveryLedger.PushReader) {
        state.withLock { $0.ledger.setPushReader(reader) }
    }

    /// The live counts, with the send p99 worked out here rather than on every send.
    package var live: LiveCounts {
        state.withLock { state in
            var live = state.live
            live.sendP99 = state.sendCorrected.percentile(99)
            return live
        }
    }

    private func second(_ time: Int64) -> Int {
        max(0, Int((time - start) / 1_000_000_000))
    }

    /// Applies a batch of events under one lock acquisition. With `mayFold` false a fold that is
    /// due is left for ``foldIfDue()`` (an event loop's thread must not stall on one); returns
    /// whether one is due.
    @discardableResult
    package func apply(_ events: [RunEvent], mayFold: Bool = true) -> Bool {
        let (folded, due) = state.withLock { state in
            for event in events { apply(event, to: &state) }
            state.applied += events.count
            tape?.append(events)
            guard let folding, state.latest >= state.nextFold else { return (false, false) }
            return mayFold ? (fold(&state, folding), false) : (false, true)
        }
        // Outside the lock: it walks every arena.
        if folded { CHeap.releaseFreePages() }
        return due
    }

    /// Folds, if a fold is due.
    package func foldIfDue() {
        apply([])
    }

    /// When the first marker of `label` was set (a replay's "traffic starts"), if one was.
    package func firstMarker(_ label: String) -> Int64? {
        state.withLock { $0.markers.first { $0.1 == label }?.0 }
    }

    /// Whether applying events writes them to a file.
    package var writesTape: Bool { tape != nil }

    /// Folds what has settled for good; whether anything was.
    private func fold(_ state: inout State, _ folding: Folding) -> Bool {
        let now = Saturating.subtract(state.latest, folding.slack.nanoseconds)
        state.nextFold = Saturating.add(state.latest, folding.every.nanoseconds)
        let before = state.ledger.foldedSends
        let deliveries = state.ledger.fold(now: now, deadline: folding.deadline, incidentLimit: ResultBuilder.incidentLimit)
        let devices = state.ledger.devices
        state.folded.add(deliveries, user: { devices[$0].user }, second: second)
        return state.ledger.foldedSends > before
    }

    private func publish(_ event: RunEvent, state: State, to metrics: LiveMetrics) {
        switch event {
        // Live metrics carry the corrected figure only, as for sends.
        case .operation(let metric, let ns, _, _) where !metric.hasSuffix(".raw"): metrics.latency(metric).recordNanoseconds(ns)
        case .error(let error, _): metrics.error(error.label).increment()
        case .deviceReady: metrics.devicesReady.set(to: Double(state.live.devicesReady + 1))
        case .deviceFailed: metrics.devicesFailed.set(to: Double(state.live.devicesFailed + 1))
        case .send(let send):
            (send.succeeded ? metrics.sendsOK : metrics.sendsFailed)[send.kind]?.increment()
            metrics.latency(MetricName.send).recordNanoseconds(send.end - send.intended)
        case .sendDropped: metrics.sendsDropped.increment()
        case .receipt(let receipt, _):
            metrics.received.increment()
            if receipt.device < state.ledger.devices.count { metrics.receivedByPlatform[state.ledger.devices[receipt.device].platform]?.increment() }
            if case .send(let id) = receipt.attribution, let send = state.ledger.sends[id] {
                let hops = receipt.path.map {
                    DeliveryLedger.HopTimes.of($0, start: send.start, intended: send.intended, received: receipt.time, inHand: receipt.contentTime)
                }
                metrics.recordReceipt(delivery: receipt.time - send.intended, hops: hops, send: id, sendStart: send.start, at: receipt.time)
            }
        default: break
        }
    }

    private func count(_ error: ErrorClass, at: Int64, in state: inout State) {
        let label = error.label
        let current = state.errors[label] ?? (0, at, at)
        state.errors[label] = (current.count + 1, min(current.first, at), max(current.last, at))
        state.live.errors += 1
        bucket(&state, at) {
            $0.errors += 1
            $0.errorsByClass[label, default: 0] += 1
        }
    }

    private func bucket(_ state: inout State, _ time: Int64, _ body: (inout SecondBucket) -> Void) {
        let index = second(time)
        if state.seconds.count <= index {
            state.seconds.append(contentsOf: Array(repeating: SecondBucket(), count: index - state.seconds.count + 1))
        }
        body(&state.seconds[index])
    }

    private func apply(_ event: RunEvent, to state: inout State) {
        if let metrics { publish(event, state: state, to: metrics) }
        switch event {
        case .operation(let metric, let ns, let failed, _):
            state.closed[metric, default: LatencyHistogram()].record(nanoseconds: ns)
            if failed { state.failures[metric, default: 0] += 1 }
        case .error(let error, let at):
            count(error, at: at, in: &state)
        case .deviceReady(_, let at):
            state.live.devicesReady += 1
            bucket(&state, at) { $0.devicesReady += 1 }
        case .deviceFailed:
            state.live.devicesFailed += 1
        case .eligibility(let device, let eligible, let since, let at):
            state.ledger.setEligible(device, eligible, at: at, since: since)
        case .send(let send):
            state.latest = max(state.latest, send.end)
            state.ledger.record(send)
            // As for every operation: answers in the histograms, transport failures in errors.
            if send.answered {
                state.sendCorrected.record(nanoseconds: send.end - send.intended)
                state.sendRaw.record(nanoseconds: send.end - send.start)
                if !send.succeeded { state.failures[MetricName.send, default: 0] += 1 }
            }
            state.live.sends += 1
            if !send.answered { state.unanswered += 1 }
            if send.start - send.intended > 10_000_000 { state.live.sendsLateStart += 1 }
            if !send.succeeded { state.live.sendFailures += 1 }
            bucket(&state, send.start) {
                $0.sends += 1
                if !send.succeeded { $0.sendFailures += 1 }
            }
        case .sendDropped(let at):
            state.live.sendsDropped += 1
            state.dropsDue.append(at)
            bucket(&state, at) { $0.sendsDropped += 1 }
        case .senderLate(let lag):
            state.lateWakes += 1
            state.longestWakeLag = max(state.longestWakeLag, lag)
        case .receipt(let receipt, let push):
            state.latest = max(state.latest, receipt.time)
            state.ledger.record(receipt, push: push)
            state.live.received += 1
            bucket(&state, receipt.time) { $0.received += 1 }
        case .rejection(let rejection):
            state.ledger.record(rejection)
        case .probeLeak(let leak):
            state.ledger.record(leak)
        case .pushReport(let report):
            for hop in report.hops {
                state.ledger.record(hop)
                if hop.step == .refused, let status = hop.status {
                    let error = ErrorClass.pushService(platform: hop.platform, status: status, reason: hop.reason ?? "")
                    // An error like the run's own, live metrics included.
                    metrics?.error(error.label).increment()
                    count(error, at: hop.at, in: &state)
                }
            }
            for note in report.hub ?? [] { state.ledger.record(note) }
        case .pushServiceView(let view):
            state.ledger.setPushServiceView(view)
        case .pushServiceGap(let gap):
            state.ledger.addPushServiceGap(gap)
        case .marker(let label, let at):
            state.markers.append((at, label))
        }
    }
}
