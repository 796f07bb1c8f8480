import Foundation
import PushFleetCore
import PushFleetResults

extension ResultBuilder {
    /// Slices a window is also judged in.
    static let windowSlices = 4

    /// Judges the sends whose intended start fell in `window` (run-clock instants): the
    /// scenario's rules over the whole span and over each slice, misdelivery and leaks at once,
    /// and the backlog of unsettled pairs at each slice's end.
    func window(_ state: Recorder.State, _ window: Range<Int64>) -> RunResult.Window {
        let length = Double(window.upperBound - window.lowerBound) / 1e9
        let whole = measures(state, window)
        let step = (window.upperBound - window.lowerBound) / Int64(Self.windowSlices)
        let slices = (0..<Self.windowSlices).map { index in
            let start = window.lowerBound + Int64(index) * step
            return measures(state, start..<(index == Self.windowSlices - 1 ? window.upperBound : start + step))
        }
        let sliced = slices.map { thresholds(histograms: $0.histograms, counters: $0.counters) }
        let judged = thresholds(histograms: whole.histograms, counters: whole.counters).enumerated().map { index, rule in
            RunResult.WindowThreshold(
                metric: rule.metric, expression: rule.expression, measured: rule.measured, unit: rule.unit, passed: rule.passed,
                slices: sliced.count, slicesFailed: sliced.filter { !$0[index].passed }.count
            )
        }
        // Unsettled pairs at each slice's end: expected so far less delivered by then.
        var expected = 0
        let backlog = slices.enumerated().map { index, slice -> Int in
            expected += slice.verdict.total.expected
            let end = index == slices.count - 1 ? window.upperBound : window.lowerBound + Int64(index + 1) * step
            return expected - whole.verdict.deliveries.filter { $0.receivedAt <= end }.count
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

    private struct Measures {
        var verdict: DeliveryLedger.Verdict
        var histograms: [String: LatencyHistogram]
        var counters: [String: Double]
    }

    /// The verdict, latencies and counters of the sends intended in `span`.
    private func measures(_ state: Recorder.State, _ span: Range<Int64>) -> Measures {
        let verdict = state.ledger.verdict(deadline: scenario.deadline, incidentLimit: 0, listeningEnded: listeningEnded, window: span)
        var histograms = Self.histograms(state, verdict)
        var corrected = LatencyHistogram()
        var raw = LatencyHistogram()
        var sends = 0
        var failures = 0
        var lateStarts = 0
        for send in state.ledger.sends.values where span.contains(send.intended) {
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
        // Drops are kept by the second: those of the seconds the span covers.
        let first = second(span.lowerBound)
        let last = second(max(span.lowerBound, span.upperBound - 1))
        let dropped = state.seconds.indices.filter { $0 >= first && $0 <= last }.reduce(0) { $0 + state.seconds[$1].sendsDropped }
        let counters = counters(
            verdict.total, sends: sends, sendFailures: failures, dropped: dropped, lateStarts: lateStarts,
            errors: state.errors.values.reduce(0) { $0 + $1.count }, devicesReady: state.live.devicesReady
        )
        return Measures(verdict: verdict, histograms: histograms, counters: counters)
    }
}
