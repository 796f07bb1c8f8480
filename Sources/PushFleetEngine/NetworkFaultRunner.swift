import PushFleetCore
import PushFleetMetrics

/// Puts the plan's faults in force at their times, from the start of traffic: the kernel's rules
/// (one shard applies them for all) and the delays of this process's proxy on the link; the
/// shard that applies the rules marks each change on the run's time charts. The table is the
/// launcher's to install and remove (``FleetRunner``), so that it goes even when the run is cut short.
struct NetworkFaultRunner: Sendable {
    let plan: NetworkFaultPlan
    /// Whether this process marks the changes and applies the kernel's rules (when there are any).
    let owner: Bool
    let proxy: PhoneLinkProxy?

    func run(_ context: RunContext, trafficStart: Int64) async {
        for change in plan.changes {
            guard await context.sleep(until: trafficStart + change.at.nanoseconds) else { return }
            let at = context.now()
            proxy?.setActive(change.active, began: change.began)
            guard owner else { continue }
            do {
                if plan.faults.contains(where: \.dropsPackets) { try await NFTables.run(plan.applyScript(active: change.active)) }
                for index in change.began { context.emit(.marker("network: \(plan.faults[index].label) begins", at: at)) }
                for index in change.ended { context.emit(.marker("network: \(plan.faults[index].label) ends", at: at)) }
            } catch {
                // A run whose faults did not happen as the scenario says tested something else:
                // it stops, marked so, rather than pass.
                context.emit(.error(.failed("network.faults", "nft_refused"), at: at))
                context.emit(.marker("network: faults could not be changed: \(error)", at: at))
                _ = context.signals.stop.escalate(reason: "network faults could not be changed: \(error)")
                return
            }
        }
    }
}
