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
            return RunResult.NetworkFaultWindow(
                fault: index + 1, label: fault.label, startSecond: Double(start - recorder.start) / 1e9, endSecond: Double(end - recorder.start) / 1e9,
                devices: plan.members[index].count, delivery: verdict.total
            )
        }
    }
}
