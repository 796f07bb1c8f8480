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
            let (p50, p99) = Self.hopPercentiles(verdict.deliveries.compactMap(\.hops))
            var window = RunResult.NetworkFaultWindow(
                fault: index + 1, label: fault.label, startSecond: Double(start - recorder.start) / 1e9, endSecond: Double(end - recorder.start) / 1e9,
                devices: plan.members[index].count, delivery: verdict.total, hopP50Ms: p50, hopP99Ms: p99
            )
            window.deliveryByPlatform = Dictionary(uniqueKeysWithValues: verdict.byPlatform.map { ($0.key.rawValue, $0.value) })
            return window
        }
    }

    /// Nearest-rank p50 and p99 of each hop, in ms.
    static func hopPercentiles(_ hops: [DeliveryLedger.HopTimes]) -> (p50: [String: Double], p99: [String: Double]) {
        let values: [(String, [Int64])] = [
            ("backend", hops.map(\.backend)), ("hub", hops.compactMap(\.hub)), ("push_service", hops.map(\.pushService)),
            ("device", hops.map(\.device)), ("fetch", hops.compactMap(\.fetch)),
        ]
        var p50: [String: Double] = [:]
        var p99: [String: Double] = [:]
        for (name, samples) in values where !samples.isEmpty {
            let sorted = samples.sorted()
            func rank(_ q: Double) -> Double { Double(sorted[min(sorted.count - 1, max(0, Int((q * Double(sorted.count)).rounded(.up)) - 1))]) / 1e6 }
            p50[name] = (rank(0.5) * 100).rounded() / 100
            p99[name] = (rank(0.99) * 100).rounded() / 100
        }
        return (p50, p99)
    }
}
