import PushFleetCore
import PushFleetLedger
import PushFleetResults

extension ResultBuilder {
    /// Each fault's window judged on its own: the sends that started in it, counted for the
    /// devices it touched only. Runs with network faults do not fold, so every send is at hand.
    func faultWindows(_ ledger: DeliveryLedger, _ plan: NetworkFaultPlan, trafficStart: Int64) -> [RunResult.NetworkFaultWindow] {
        plan.faults.enumerated().map { index, fault in
            let start = trafficStart + fault.at.nanoseconds
            let end = start + fault.duration.nanoseconds
            let verdict = ledger.verdict(
                deadline: scenario.deadline, incidentLimit: 0, listeningEnded: listeningEnded, window: start..<end, devices: Set(plan.members[index])
            )
            let (p50, p99) = Self.hopPercentiles(verdict.deliveries)
            var window = RunResult.NetworkFaultWindow(
                fault: index + 1, label: fault.label, startSecond: Double(start - recorder.start) / 1e9, endSecond: Double(end - recorder.start) / 1e9,
                devices: plan.members[index].count, delivery: verdict.total, hopP50Ms: p50, hopP99Ms: p99
            )
            window.deliveryByPlatform = Dictionary(uniqueKeysWithValues: verdict.byPlatform.map { ($0.key.rawValue, $0.value) })
            return window
        }
    }

    /// Each hop's p50 and p99 in ms, from the same histograms as the run's hop table.
    static func hopPercentiles(_ deliveries: [DeliveryLedger.Delivery]) -> (p50: [String: Double], p99: [String: Double]) {
        let histograms = hopHistograms(deliveries)
        var p50: [String: Double] = [:]
        var p99: [String: Double] = [:]
        for hop in MetricName.hops {
            guard let histogram = histograms[hop] else { continue }
            let name = String(hop.dropFirst("hop.".count))
            p50[name] = (Double(histogram.percentile(50)) / 1e4).rounded() / 100
            p99[name] = (Double(histogram.percentile(99)) / 1e4).rounded() / 100
        }
        return (p50, p99)
    }
}
