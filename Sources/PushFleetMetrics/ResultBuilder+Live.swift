import PushFleetCore
import PushFleetLedger
import PushFleetResults
import Synchronization

extension ResultBuilder {
    /// What the live page shows each second (``LiveFrame``), from the recorder as it stands.
    package struct LiveCursor: Sendable {
        /// The first second not yet sent, and how many markers were.
        var nextSecond = 0
        var markers = 0
        package init() {}
    }

    /// The counts and the seconds completed since `cursor`, cheap enough for every second.
    package func liveFrame(now: Int64, phase: String, eventLag: Int64, cursor: inout LiveCursor) -> LiveFrame {
        recorder.state.withLock { state in
            let completed = min(state.seconds.count, max(0, second(now)))
            var seconds: [LiveFrame.Second] = []
            if cursor.nextSecond < completed {
                for index in cursor.nextSecond..<completed {
                    let bucket = state.seconds[index]
                    seconds.append(
                        .init(
                            second: index, sends: bucket.sends, dropped: bucket.sendsDropped, received: bucket.received, errors: bucket.errors,
                            devicesReady: bucket.devicesReady
                        )
                    )
                }
                cursor.nextSecond = completed
            }
            let markers = state.markers.dropFirst(cursor.markers).map { LiveFrame.Marker(second: Double($0.0 - recorder.start) / 1e9, label: $0.1) }
            cursor.markers = state.markers.count
            let live = state.live
            return LiveFrame(
                second: Double(now - recorder.start) / 1e9, phase: phase,
                devices: .init(planned: plan.devices.count, ready: live.devicesReady, failed: live.devicesFailed),
                totals: .init(
                    sends: live.sends, sendFailures: live.sendFailures, sendsDropped: live.sendsDropped, sendsLateStart: live.sendsLateStart,
                    received: live.received, errors: live.errors
                ),
                seconds: seconds, errors: state.errors.mapValues(\.count),
                generator: .init(lateWakes: state.lateWakes, longestWakeLagMs: Double(state.longestWakeLag) / 1e6, eventLagMs: Double(eventLag) / 1e6),
                markers: Array(markers), judged: nil
            )
        }
    }

    /// The ledger's and the rules' judgement of the sends intended in the `window` before a
    /// deadline ago (their pairs have had their deadline), and of every send since the traffic
    /// began up to then, by the functions the final report and a capacity step's window use.
    /// Nil before the traffic has run a deadline.
    package func liveJudgement(now: Int64, trafficStart: Int64, window: Duration) -> LiveFrame.Judged? {
        let end = now - scenario.deadline.nanoseconds
        guard end > trafficStart else { return nil }
        let began = MonotonicClock.nanoseconds()
        let span = max(trafficStart, end - window.nanoseconds)..<end
        // One lock at a time: events wait for one walk of the ledger, not three.
        let sliding = recorder.state.withLock { measures($0, span) }
        let soFar = recorder.state.withLock { measures($0, trafficStart..<end) }
        let recent = recorder.state.withLock { measures($0, end..<max(end + 1, now)) }
        let own = scenario.thresholds.count
        let windowRules = thresholds(histograms: sliding.histograms, counters: sliding.counters)
        let soFarRules = thresholds(histograms: soFar.histograms, counters: soFar.counters)
        let rules = zip(windowRules, soFarRules).enumerated().map { index, pair -> LiveFrame.Rule in
            let (window, whole) = pair
            let state =
                whole.measured == nil && window.measured == nil ? "waiting" : !whole.passed && whole.measured != nil ? "failed"
                : !window.passed && window.measured != nil ? "breaching" : "ok"
            return LiveFrame.Rule(
                metric: window.metric, expression: window.expression, origin: index < own ? nil : "default", unit: window.unit,
                windowMeasured: window.measured, soFarMeasured: whole.measured, windowFailed: window.measured != nil && !window.passed, state: state
            )
        }
        var latency: [String: LiveFrame.Latency] = [:]
        for name in [MetricName.delivery, MetricName.endToEnd, MetricName.send] + MetricName.hops {
            guard let histogram = sliding.histograms[name], histogram.count > 0 else { continue }
            latency[name] = .init(
                p50: Double(histogram.percentile(50)) / 1e6, p99: Double(histogram.percentile(99)) / 1e6, count: Int(histogram.count)
            )
        }
        let length = max(Double(span.upperBound - span.lowerBound) / 1e9, 0.001)
        let total = sliding.verdict.total
        var breaches: [String] = []
        if total.misdelivered > 0 { breaches.append("misdelivered: \(total.misdelivered) pushes reached a device of another user") }
        if total.leaks > 0 { breaches.append("leaks: \(total.leaks) notifications readable by another user") }
        for rule in rules where rule.state == "breaching" || rule.state == "failed" {
            breaches.append("\(rule.metric): \(rule.expression) (\(rule.state))")
        }
        return LiveFrame.Judged(
            windowStart: Double(span.lowerBound - recorder.start) / 1e9, windowEnd: Double(span.upperBound - recorder.start) / 1e9,
            latency: latency, windowDelivery: total, soFarDelivery: soFar.verdict.total,
            inFlight: max(0, recent.verdict.total.expected - recent.verdict.deliveries.count),
            funnel: Self.hops(soFar.verdict).funnel,
            offeredRate: ((sliding.counters["sends"] ?? 0) + (sliding.counters["sends.dropped"] ?? 0)) / length,
            throughput: Double(sliding.verdict.deliveries.count) / length, rules: rules, breaches: breaches,
            costMs: Double(MonotonicClock.nanoseconds() - began) / 1e6
        )
    }
}
