import Foundation
import PushFleetCore
import PushFleetLedger
import PushFleetResults

extension ResultBuilder {
    /// Slices a window is also judged in.
    static let windowSlices = 4

    /// Judges the sends that started in `window` (run-clock instants): the
    /// scenario's rules over the whole span and over each slice, misdelivery and leaks at once,
    /// and the backlog of unsettled pairs at each slice's end.
    func window(_ state: Recorder.State, _ window: Range<Int64>) -> RunResult.Window {
        let length = Double(window.upperBound - window.lowerBound) / 1e9
        let whole = measures(state, window)
        let step = (window.upperBound - window.lowerBound) / Int64(Self.windowSlices)
        // The last slice takes the division's remainder.
        let spans = (0..<Self.windowSlices).map { index in
            let start = window.lowerBound + Int64(index) * step
            return start..<(index == Self.windowSlices - 1 ? window.upperBound : start + step)
        }
        let slices = spans.map { measures(state, $0) }
        let sliced = slices.map { thresholds(histograms: $0.histograms, counters: $0.counters) }
        let judged = thresholds(histograms: whole.histograms, counters: whole.counters).enumerated().map { index, rule in
            RunResult.WindowThreshold(
                metric: rule.metric, expression: rule.expression, measured: rule.measured, unit: rule.unit, passed: rule.passed,
                slices: sliced.count, slicesFailed: sliced.filter { !$0[index].passed }.count
            )
        }
        // Pairs in flight at each slice's end: those of the slices still within a deadline of it,
        // less the ones delivered by then. A pair past its deadline is lost or late, which the
        // rules judge; it is not work piling up.
        let deadline = scenario.deadline.nanoseconds
        let backlog = spans.map(\.upperBound).map { end -> Int in
            var outstanding = 0
            for (index, span) in spans.enumerated() where span.lowerBound < end && span.upperBound > end - deadline {
                let delivered = whole.verdict.deliveries.filter { delivery in
                    span.contains(delivery.receivedAt - delivery.raw) && delivery.receivedAt <= end
                }.count
                outstanding += slices[index].verdict.total.expected - delivered
            }
            return max(0, outstanding)
        }
        let pairRate = Double(whole.verdict.total.expected) / max(length, 0.001)
        let bound = Int((pairRate * max(scenario.deadline.seconds, 0.1)).rounded(.up))
        let growth = (backlog.last ?? 0) - (backlog.first ?? 0)
        let growing = growth > max(10, Int(0.2 * pairRate))
        var breaches: [String] = []
        let total = whole.verdict.total
        if total.misdelivered > 0 { breaches.append("misdelivered: \(total.misdelivered) pushes reached a device of another user") }
        if total.leaks > 0 { breaches.append("leaks: \(total.leaks) notifications readable by another user") }
        if growing { breaches.append("backlog growing: \(backlog.first ?? 0) → \(backlog.last ?? 0) unsettled pairs over the window") }
        if let most = backlog.max(), most > bound { breaches.append("backlog unbounded: \(most) unsettled pairs, over one deadline's worth (\(bound))") }
        for rule in judged where rule.sustained {
            let measured = rule.measured.map { String(format: "%.3f", $0) + rule.unit } ?? "no data"
            breaches.append("\(rule.metric): \(rule.expression) (measured \(measured), failed in \(rule.slicesFailed) of \(rule.slices) slices)")
        }
        let secondsFromStart = { (instant: Int64) in Double(instant - recorder.start) / 1e9 }
        return RunResult.Window(
            startSecond: secondsFromStart(window.lowerBound), endSecond: secondsFromStart(window.upperBound),
            offeredRate: ((whole.counters["sends"] ?? 0) + (whole.counters["sends.dropped"] ?? 0)) / max(length, 0.001),
            throughput: Double(whole.verdict.deliveries.count) / max(length, 0.001), delivery: total, counters: whole.counters,
            histograms: whole.histograms.filter { Self.windowLatencies.contains($0.key) }, thresholds: judged, backlog: backlog,
            backlogBound: bound, backlogGrowing: growing, hops: Self.hops(whole.verdict), breaches: breaches
        )
    }

    /// The latencies a window keeps.
    static let windowLatencies = Set(
        [MetricName.delivery, MetricName.delivery + ".raw", MetricName.send, MetricName.send + ".raw", MetricName.endToEnd] + MetricName.hops
    )

    struct Measures {
        var verdict: DeliveryLedger.Verdict
        var histograms: [String: LatencyHistogram]
        var counters: [String: Double]
    }

    /// The verdict, latencies and counters of the sends intended in `span`.
    func measures(_ state: Recorder.State, _ span: Range<Int64>) -> Measures {
        let verdict = state.ledger.verdict(deadline: scenario.deadline, incidentLimit: 0, listeningEnded: listeningEnded, window: span)
        var histograms = Self.histograms(state, verdict)
        var corrected = LatencyHistogram()
        var raw = LatencyHistogram()
        var sends = 0
        var failures = 0
        var lateStarts = 0
        // As the judge places them: by when they started.
        for send in state.ledger.sends.values where span.contains(send.start) {
            sends += 1
            if !send.succeeded { failures += 1 }
            if send.start - send.intended > 10_000_000 { lateStarts += 1 }
            if send.answered {
                corrected.record(nanoseconds: send.end - send.intended)
                raw.record(nanoseconds: send.end - send.start)
            }
        }
        histograms[MetricName.send] = corrected
        histograms[MetricName.send + ".raw"] = raw
        let dropped = state.dropsDue.reduce(0) { span.contains($1) ? $0 + 1 : $0 }
        let counters = counters(
            verdict.total, sends: sends, sendFailures: failures, dropped: dropped, lateStarts: lateStarts,
            errors: state.errors.values.reduce(0) { $0 + $1.count }, devicesReady: state.live.devicesReady
        )
        return Measures(verdict: verdict, histograms: histograms, counters: counters)
    }
}
