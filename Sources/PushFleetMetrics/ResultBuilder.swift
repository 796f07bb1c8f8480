import Foundation
package import PushFleetCore
import PushFleetLedger
package import PushFleetResults
import Synchronization

/// Turns what the recorder holds into a ``RunResult``: verdicts, operation tables, per-user
/// rows, the per-second series and the thresholds.
package struct ResultBuilder {
    let scenario: Scenario
    let plan: FleetPlan
    let recorder: Recorder
    /// When the run stopped listening before its drain (a second stop request), if it did.
    package var listeningEnded: Int64? = nil
    /// What the engine measured of its own load; nil judges the generator on the recorder alone.
    package var generatorLoad: GeneratorLoad? = nil
    /// A span of the traffic also judged on its own (run-clock instants), as a capacity step is.
    package var judgedWindow: Range<Int64>? = nil
    /// False for a shard: its ledger holds only its part, which only the merge judges, so the
    /// verdict's per-device and per-user tables are not built for nothing.
    package var judgesLedger = true
    /// The run's network faults and when its traffic started (run clock), for a ledger per window.
    package var networkFaults: (plan: NetworkFaultPlan, trafficStart: Int64)? = nil

    /// The run's trace ids (the run id's hash worked out once).
    let traces: TraceRoot

    package init(scenario: Scenario, plan: FleetPlan, recorder: Recorder) {
        self.scenario = scenario
        self.plan = plan
        self.recorder = recorder
        traces = TraceRoot(run: plan.runID)
    }

    /// Judges the ledger and builds the result, in steps: the verdict, the latency histograms,
    /// the operations table, the counters, the thresholds, then the rows.
    package func build(info: RunResult.Info) -> RunResult {
        recorder.state.withLock { state in
            let verdict =
                judgesLedger
                ? state.ledger.verdict(deadline: scenario.deadline, incidentLimit: Self.incidentLimit, listeningEnded: listeningEnded)
                : DeliveryLedger(users: 0).verdict(deadline: scenario.deadline, incidentLimit: 0)
            // A run that folded keeps its deliveries' latencies in summaries (DeliveryDigest).
            let digest = state.digest(with: verdict, user: { plan.devices[$0].user }, second: second)
            let histograms = Self.histograms(state, verdict, digest: digest)
            var failures = state.failures
            failures[MetricName.delivery] = verdict.total.lost
            let operations = Self.operations(histograms, failures: failures, duration: max(info.durationSeconds, 0.001))
            let counters = counters(state, verdict.total)
            var thresholds = thresholds(histograms: histograms, counters: counters)
            // A rule that stopped the run failed over its window, whatever the whole run measures.
            if let rule = info.abortedBy {
                for index in thresholds.indices where "\(thresholds[index].metric): \(thresholds[index].expression)" == rule {
                    thresholds[index].passed = false
                }
            }
            var result = RunResult(
                info: info,
                devices: .init(
                    planned: plan.devices.count, ready: state.live.devicesReady, failed: plan.devices.count - state.live.devicesReady,
                    byPlatform: Dictionary(grouping: plan.devices, by: { $0.platform.rawValue }).mapValues(\.count)
                ),
                operations: operations,
                histograms: histograms,
                delivery: verdict.total,
                deliveryByPlatform: Dictionary(uniqueKeysWithValues: verdict.byPlatform.map { ($0.key.rawValue, $0.value) }),
                counters: counters,
                users: judgesLedger ? users(verdict, digest: digest) : [],
                timeseries: timeseries(state, verdict, digest: digest),
                errors: state.errors.map { label, value in
                    RunResult.ErrorRow(errorClass: label, count: value.count, firstSecond: second(value.first), lastSecond: second(value.last))
                }.sorted { $0.count > $1.count },
                thresholds: thresholds,
                markers: state.markers.map { RunResult.Marker(second: Double($0.0 - recorder.start) / 1e9, label: $0.1) },
                incidents: verdict.incidents.map { incident($0, ledger: state.ledger) },
                incidentTotals: Dictionary(uniqueKeysWithValues: verdict.incidentTotals.map { ($0.key.rawValue, $0.value) }),
                hops: Self.hops(verdict, digest: digest),
                generator: generator(
                    state, load: generatorLoad ?? .init(eventLag: 0, cpuCores: nil, cores: 0), histograms: histograms,
                    trafficSeconds: info.trafficEndSecond - info.trafficStartSecond
                ),
                window: judgedWindow.map { window(state, $0) }
            )
            result.sampledDeliveries = sampled(verdict.deliveries, ledger: state.ledger)
            if judgesLedger, let networkFaults { result.networkFaults = faultWindows(state.ledger, networkFaults.plan, trafficStart: networkFaults.trafficStart) }
            return result
        }
    }

    /// The delivered pairs in the traces' sample, in send order, at most the result's limit; nil
    /// when the run's requests carried no trace context or nothing is sampled.
    private func sampled(_ deliveries: [DeliveryLedger.Delivery], ledger: DeliveryLedger) -> [SampledDelivery]? {
        let tracing = scenario.tracing
        guard judgesLedger, tracing.propagate, tracing.sample > 0 else { return nil }
        func seconds(_ time: Int64) -> Double { (Double(time - recorder.start) / 1e6).rounded() / 1e3 }
        // Filtered before sorted: a long run holds a great many deliveries, the sample few.
        let chosen = deliveries.filter { !$0.late && tracing.samples(traces.send($0.send)) }
            .sorted { ($0.send, $0.device) < ($1.send, $1.device) }.prefix(RunResult.sampledLimit)
        var kept: [SampledDelivery] = []
        for delivery in chosen {
            guard let send = ledger.knownSend(delivery.send) else { continue }
            let pushSpan = delivery.hops?.context?.spanID(in: traces.send(delivery.send))
            kept.append(
                SampledDelivery(
                    send: delivery.send, device: delivery.device, platform: plan.devices[delivery.device].platform.rawValue,
                    sendStartSecond: seconds(send.start), sendEndSecond: seconds(send.end), receivedSecond: seconds(delivery.receivedAt),
                    backendNs: delivery.hops?.backend, hubNs: delivery.hops?.hub, pushServiceNs: delivery.hops?.pushService,
                    deviceNs: delivery.hops?.device, fetchNs: delivery.hops?.fetch,
                    pushSpan: pushSpan, pushUntraced: delivery.hops != nil && pushSpan == nil ? true : nil
                )
            )
        }
        return kept.isEmpty ? nil : kept
    }

    /// The closed operations' histograms as recorded, the sends' from the recorder, and the
    /// deliveries' and end-to-end ones from the verdict (only judged pairs count).
    static func histograms(_ state: Recorder.State, _ verdict: DeliveryLedger.Verdict, digest: DeliveryDigest? = nil) -> [String: LatencyHistogram] {
        var histograms: [String: LatencyHistogram] = state.closed
        histograms[MetricName.send] = state.sendCorrected
        histograms[MetricName.send + ".raw"] = state.sendRaw
        if let digest {
            // As deliveryHistograms makes them: the delivery and end-to-end ones even when empty.
            for name in [MetricName.delivery, MetricName.delivery + ".raw", MetricName.endToEnd, MetricName.endToEnd + ".raw"] {
                histograms[name] = LatencyHistogram()
            }
            histograms.merge(digest.histograms) { $1 }
        } else {
            histograms.merge(deliveryHistograms(verdict.deliveries)) { $1 }
        }
        return histograms
    }

    /// The delivery, end-to-end and hop histograms of some deliveries.
    static func deliveryHistograms(_ deliveries: [DeliveryLedger.Delivery]) -> [String: LatencyHistogram] {
        var histograms: [String: LatencyHistogram] = [:]
        var delivery = LatencyHistogram()
        var deliveryRaw = LatencyHistogram()
        var endToEnd = LatencyHistogram()
        var endToEndRaw = LatencyHistogram()
        for item in deliveries {
            delivery.record(nanoseconds: item.corrected)
            deliveryRaw.record(nanoseconds: item.raw)
            if let corrected = item.endToEndCorrected, let raw = item.endToEndRaw {
                endToEnd.record(nanoseconds: corrected)
                endToEndRaw.record(nanoseconds: raw)
            }
        }
        histograms[MetricName.delivery] = delivery
        histograms[MetricName.delivery + ".raw"] = deliveryRaw
        histograms[MetricName.endToEnd] = endToEnd
        histograms[MetricName.endToEnd + ".raw"] = endToEndRaw
        histograms.merge(hopHistograms(deliveries)) { $1 }
        return histograms
    }

    /// One row per operation (open-model ones twice: corrected and raw), the known ones first.
    static func operations(_ histograms: [String: LatencyHistogram], failures: [String: Int], duration: Double) -> [RunResult.Operation] {
        var operations: [RunResult.Operation] = []
        for name in MetricName.operations + histograms.keys.filter({ !MetricName.operations.contains($0) && !$0.hasSuffix(".raw") }).sorted() {
            guard let histogram = histograms[name], histogram.count > 0 || MetricName.openModel.contains(name) else { continue }
            let open = MetricName.openModel.contains(name) || histograms[name + ".raw"] != nil
            operations.append(Self.operation(name, open ? "corrected" : "closed", histogram, failures: failures[name] ?? 0, duration: duration))
            if open, let raw = histograms[name + ".raw"] {
                operations.append(Self.operation(name, "raw", raw, failures: failures[name] ?? 0, duration: duration))
            }
        }
        return operations
    }

    /// Every counter a threshold can name.
    private func counters(_ state: Recorder.State, _ counts: DeliveryLedger.Counts) -> [String: Double] {
        counters(
            counts, sends: state.ledger.sendsRecorded, sendFailures: state.live.sendFailures, dropped: state.live.sendsDropped,
            lateStarts: state.live.sendsLateStart, errors: state.errors.values.reduce(0) { $0 + $1.count }, devicesReady: state.live.devicesReady,
            folded: state.ledger.foldedSends
        )
    }

    /// The counters from their parts, for the whole run or a window of it.
    func counters(
        _ counts: DeliveryLedger.Counts, sends: Int, sendFailures: Int, dropped: Int, lateStarts: Int, errors: Int, devicesReady: Int,
        folded: Int = 0
    ) -> [String: Double] {
        let failedDevices = plan.devices.count - devicesReady
        return [
            "delivery.expected": Double(counts.expected), "delivery.delivered": Double(counts.delivered),
            "delivery.late": Double(counts.late), "delivery.lost": Double(counts.lost),
            "delivery.misdelivered": Double(counts.misdelivered), "delivery.duplicates": Double(counts.duplicates),
            "delivery.indeterminate": Double(counts.indeterminate), "delivery.stale": Double(counts.stale),
            "delivery.unverified": Double(counts.unverified), "delivery.unregistered": Double(counts.unregistered),
            "delivery.undecryptable": Double(counts.undecryptable),
            "delivery.replaced": Double(counts.replaced), "delivery.recovered": Double(counts.recovered),
            "delivery.sent_to_dead_token": Double(counts.sentToDeadToken), "leaks": Double(counts.leaks), "sends": Double(sends),
            "sends.failed": Double(sendFailures), "sends.dropped": Double(dropped),
            "sends.late_start": Double(lateStarts), "sends.folded": Double(folded),
            "errors": Double(errors), "devices.ready": Double(devicesReady),
            "devices.failed": Double(failedDevices),
            "delivery.lost_ratio": Self.ratio(counts.lost, counts.expected),
            "delivery.late_ratio": Self.ratio(counts.late, counts.expected),
            "delivery.replaced_ratio": Self.ratio(counts.replaced, counts.expected),
            "delivery.misdelivered_ratio": Self.ratio(counts.misdelivered, counts.expected + counts.misdelivered),
            "delivery.indeterminate_ratio": Self.ratio(counts.indeterminate, counts.expected + counts.indeterminate),
            "sends.failed_ratio": Self.ratio(sendFailures, sends),
            "sends.dropped_ratio": Self.ratio(dropped, sends + dropped),
            "sends.late_start_ratio": Self.ratio(lateStarts, sends),
            "devices.failed_ratio": Self.ratio(failedDevices, plan.devices.count),
        ]
    }

    /// The scenario's thresholds and the default gate's, each judged on what was measured.
    func thresholds(histograms: [String: LatencyHistogram], counters: [String: Double]) -> [RunResult.ThresholdResult] {
        let own = scenario.thresholds.count
        return scenario.effectiveThresholds.enumerated().map { index, threshold -> RunResult.ThresholdResult in
            let measured = Self.measure(threshold, histograms: histograms, counters: counters)
            let isLatency = MetricName.kind(of: threshold.metric) == .latency && threshold.aggregate != .count
            return RunResult.ThresholdResult(
                metric: threshold.metric, expression: threshold.expression, origin: index < own ? nil : "default",
                measured: measured.map { isLatency ? $0 / 1e6 : $0 },
                unit: isLatency ? "ms" : "", passed: measured.map { threshold.holds(for: $0) } ?? false
            )
        }
    }

    func second(_ time: Int64) -> Int { max(0, Int((time - recorder.start) / 1_000_000_000)) }

    /// Incidents kept per outcome; the rest are counted, so a broken backend cannot fill the disk.
    static let incidentLimit = 1000

    private func incident(_ incident: DeliveryLedger.Incident, ledger: DeliveryLedger) -> RunResult.Incident {
        let names = scenario.fleet.names
        let send = incident.send.flatMap { ledger.knownSend($0) }
        let device = incident.device.map { plan.devices[$0] }
        func seconds(_ time: Int64) -> Double { (Double(time - recorder.start) / 1e6).rounded() / 1e3 }
        var row = RunResult.Incident(
            outcome: incident.outcome.rawValue, send: incident.send, sendKind: send?.kind.rawValue, sender: send.map { names.user($0.from) },
            recipient: send.map { names.user($0.to) }, device: incident.device, deviceUser: device.map { names.user($0.user) },
            platform: device?.platform.rawValue, sendStartSecond: send.map { seconds($0.start) },
            sendEndSecond: send.map { seconds($0.end) }, eventSecond: incident.time.map(seconds),
            detail: incident.detail, hop: incident.explanation?.hop.rawValue, reason: incident.explanation.map(Self.reason)
        )
        if let push = incident.push, let id = incident.send {
            row.pushStep = push.step.rawValue
            row.pushSecond = seconds(push.handedAt)
            row.pushStepSecond = seconds(push.stepAt)
            // Joined under the provider request's span only when it carried the send's trace.
            row.pushSpan = push.context?.spanID(in: traces.send(id))
            row.pushUntraced = row.pushSpan == nil ? true : nil
        }
        return row
    }

    static func ratio(_ part: Int, _ whole: Int) -> Double { whole == 0 ? 0 : Double(part) / Double(whole) }

    static func operation(_ name: String, _ measure: String, _ h: LatencyHistogram, failures: Int, duration: Double) -> RunResult.Operation {
        func ms(_ ns: Int64) -> Double { Double(ns) / 1e6 }
        return RunResult.Operation(
            name: name, measure: measure, count: h.count, failures: failures, rps: Double(h.count) / duration, minMs: ms(h.min),
            p50Ms: ms(h.percentile(50)), p90Ms: ms(h.percentile(90)), p95Ms: ms(h.percentile(95)), p99Ms: ms(h.percentile(99)),
            p999Ms: ms(h.percentile(99.9)), maxMs: ms(h.max), meanMs: h.mean / 1e6
        )
    }

    /// The measured value in base units (ns for latencies); nil when there is no data.
    static func measure(_ threshold: Threshold, histograms: [String: LatencyHistogram], counters: [String: Double]) -> Double? {
        let name = threshold.metric.hasSuffix(".latency") ? String(threshold.metric.dropLast(".latency".count)) : threshold.metric
        if let histogram = histograms[name] ?? (MetricName.kind(of: name) == .latency ? LatencyHistogram() : nil) {
            if threshold.aggregate == .count { return Double(histogram.count) }
            guard histogram.count > 0 else { return nil }
            switch threshold.aggregate {
            case .percentile(let p): return Double(histogram.percentile(p))
            case .avg: return histogram.mean
            case .min: return Double(histogram.min)
            case .max: return Double(histogram.max)
            case .med: return Double(histogram.percentile(50))
            case .count, .value: return nil
            }
        }
        return counters[threshold.metric]
    }

    private func users(_ verdict: DeliveryLedger.Verdict, digest: DeliveryDigest?) -> [RunResult.UserRow] {
        if let digest {
            return (0..<plan.users).map { user in
                let sketch = digest.byUser[user]
                return RunResult.UserRow(
                    user: scenario.fleet.names.user(user), devices: plan.devicesOfUser[user].count, counts: verdict.byUser[user],
                    p50Ms: sketch?.percentile(50).map { Double($0) / 1e6 }, p99Ms: sketch?.percentile(99).map { Double($0) / 1e6 }
                )
            }
        }
        var latencies = Array(repeating: [Int64](), count: plan.users)
        for item in verdict.deliveries { latencies[plan.devices[item.device].user].append(item.raw) }
        return (0..<plan.users).map { user in
            let sorted = latencies[user].sorted()
            return RunResult.UserRow(
                user: scenario.fleet.names.user(user), devices: plan.devicesOfUser[user].count, counts: verdict.byUser[user],
                p50Ms: Self.percentile(sorted, 50).map { Double($0) / 1e6 }, p99Ms: Self.percentile(sorted, 99).map { Double($0) / 1e6 }
            )
        }
    }

    /// Nearest-rank percentile of sorted values.
    static func percentile(_ sorted: [Int64], _ p: Double) -> Int64? {
        guard !sorted.isEmpty else { return nil }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    private func timeseries(_ state: Recorder.State, _ verdict: DeliveryLedger.Verdict, digest: DeliveryDigest?) -> [RunResult.Second] {
        var latencyBySecond: [Int: [Int64]] = [:]
        if digest == nil {
            for item in verdict.deliveries { latencyBySecond[second(item.receivedAt), default: []].append(item.raw) }
        }
        var misdelivered: [Int: Int] = [:]
        for time in verdict.misdeliveredAt { misdelivered[second(time), default: 0] += 1 }
        let latest = max(latencyBySecond.keys.max() ?? 0, digest?.bySecond.keys.max() ?? 0)
        let last = max(state.seconds.count - 1, latest, misdelivered.keys.max() ?? 0)
        guard last >= 0, !(state.seconds.isEmpty && latencyBySecond.isEmpty && digest == nil) else { return [] }
        return (0...last).map { index in
            let bucket = index < state.seconds.count ? state.seconds[index] : Recorder.SecondBucket()
            let sorted = (latencyBySecond[index] ?? []).sorted()
            if let sketch = digest?.bySecond[index] {
                return RunResult.Second(
                    second: index, devicesReady: bucket.devicesReady, sends: bucket.sends, sendFailures: bucket.sendFailures,
                    sendsDropped: bucket.sendsDropped, received: bucket.received, misdelivered: misdelivered[index] ?? 0, errors: bucket.errors,
                    errorsByClass: bucket.errorsByClass.isEmpty ? nil : bucket.errorsByClass,
                    deliveryP50Ms: sketch.percentile(50).map { Double($0) / 1e6 }, deliveryP99Ms: sketch.percentile(99).map { Double($0) / 1e6 }
                )
            }
            return RunResult.Second(
                second: index, devicesReady: bucket.devicesReady, sends: bucket.sends, sendFailures: bucket.sendFailures,
                sendsDropped: bucket.sendsDropped, received: bucket.received, misdelivered: misdelivered[index] ?? 0, errors: bucket.errors,
                errorsByClass: bucket.errorsByClass.isEmpty ? nil : bucket.errorsByClass,
                deliveryP50Ms: Self.percentile(sorted, 50).map { Double($0) / 1e6 }, deliveryP99Ms: Self.percentile(sorted, 99).map { Double($0) / 1e6 }
            )
        }
    }
}
