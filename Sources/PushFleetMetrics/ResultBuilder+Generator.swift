import Foundation
import PushFleetCore
import PushFleetLedger
package import PushFleetResults

extension ResultBuilder {
    /// What the engine measured of its own load, beside the recorder's counts.
    package struct GeneratorLoad: Sendable {
        /// The longest an event waited for the recorder (ns).
        package var eventLag: Int64
        /// CPU used over the traffic, in cores.
        package var cpuCores: Double?
        package var cores: Int
        /// The push service's event loops over the traffic, when it said.
        package var pushService: RunResult.Generator.PushServiceLoad?
        /// How long the push service, which said its load as the traffic started, was asked for it
        /// as the traffic ended without an answer (s); nil when it answered or never said.
        package var pushServiceSilentSeconds: Double?

        package init(
            eventLag: Int64, cpuCores: Double?, cores: Int, pushService: RunResult.Generator.PushServiceLoad? = nil, pushServiceSilentSeconds: Double? = nil
        ) {
            self.eventLag = eventLag
            self.cpuCores = cpuCores
            self.cores = cores
            self.pushService = pushService
            self.pushServiceSilentSeconds = pushServiceSilentSeconds
        }
    }

    /// Late wakes count against the generator when they alone would fail the run's rule on late
    /// starts (`sends.late_start_ratio`, 5% in the default gate) and there are at least this many:
    /// a scenario that drops the rule says late starts are noise to it.
    static let lateWakeMinimum = 3

    /// The recorder fell behind the fleet by more than this (ns).
    static let eventLagLimit: Int64 = 1_000_000_000
    /// Share of the machine's cores past which the process is named CPU-saturated.
    static let cpuSaturation = 0.9
    /// A push service event loop whose thread was busy this share of the traffic is saturated.
    static let loopSaturation = 0.9
    /// A push service event loop ready to run and held off a core this share of the traffic, that
    /// ran less than ``starvedRunRatio`` of the time it wanted one, is starved however little it
    /// wanted: its pushes took many times their CPU time, waiting for pushfleet. A loaded machine
    /// gives a loop a third or more of the time it wants; a CPU quota or a crowded core far less.
    static let loopWaitLimit = 0.25
    static let starvedRunRatio = 0.125
    /// A push service whose loops' checks woke late this often (and at least
    /// ``lateCheckMinimum`` times) kept pushes waiting.
    static let lateCheckShare = 0.1
    static let lateCheckMinimum = 5

    /// Whether the generator kept up: late wakes, a recorder fallen behind during the traffic and sends dropped while
    /// the target answered fast each make it the limit; CPU saturation is named beside them, or
    /// noted alone (a busy process that kept its schedule measured what it was asked to).
    func generator(_ state: Recorder.State, load: GeneratorLoad, histograms: [String: LatencyHistogram], trafficSeconds: Double)
        -> RunResult.Generator
    {
        let sends = state.ledger.sendsRecorded
        let lateShare = Self.ratio(state.lateWakes, sends)
        var limits: [String] = []
        let lateRule = scenario.effectiveThresholds.first { $0.metric == "sends.late_start_ratio" }
        if state.lateWakes >= Self.lateWakeMinimum, let lateRule, !lateRule.holds(for: lateShare) {
            limits.append(
                "late starts: \(state.lateWakes.grouped) of \(sends.grouped) sends (\(Self.percent(lateShare))) started over 10 ms late because the fleet's own senders fell behind (longest \(Self.ms(state.longestWakeLag)))"
            )
        }
        if load.eventLag > Self.eventLagLimit {
            limits.append("event backlog: the recorder fell \(Self.ms(load.eventLag)) behind the fleet's events")
        }
        let dropped = droppedWhileFast(state, histograms: histograms, trafficSeconds: trafficSeconds)
        if dropped > 0 {
            limits.append(
                "dropped at max_in_flight: \(dropped.grouped) sends while the target's slowest answer (\(Self.ms(histograms[MetricName.send + ".raw"]?.max ?? 0))) could not have filled the limit at the offered rate"
            )
        }
        limits += Self.pushServiceLimits(load.pushService)
        if let seconds = load.pushServiceSilentSeconds { limits.append(Self.pushServiceSilence(seconds: seconds)) }
        if let shared = Self.sharedMachineLimit(fleetCores: load.cpuCores, machineCores: load.cores, pushService: load.pushService) {
            limits.append(shared)
        }
        var notes: [String] = []
        if let cpu = load.cpuCores, load.cores > 0, cpu >= Self.cpuSaturation * Double(load.cores) {
            let text = "CPU saturation: the fleet process used \(Self.decimal(cpu)) of \(load.cores) cores over the traffic"
            if limits.isEmpty { notes.append(text + "; it still kept its schedule") } else { limits.append(text) }
        }
        var generator = RunResult.Generator(
            lateWakes: state.lateWakes, lateWakeRatio: lateShare, longestWakeLagMs: Double(state.longestWakeLag) / 1e6,
            eventLagMs: Double(load.eventLag) / 1e6, cpuCores: load.cpuCores, cores: load.cores, droppedWhileFast: dropped, limits: limits,
            notes: notes
        )
        generator.pushService = load.pushService
        return generator
    }

    /// The fleet and its push service in another process on the same machine, together at the
    /// machine's CPU limit: each starves the other, whichever hop it shows in.
    package static func sharedMachineLimit(fleetCores: Double?, machineCores: Int, pushService: RunResult.Generator.PushServiceLoad?)
        -> String?
    {
        guard let fleet = fleetCores, machineCores > 0, let service = pushService, service.processOnFleetMachine == true,
            let share = service.processCoreShare, let cores = service.processCores
        else { return nil }
        let serviceCores = share * Double(cores)
        guard fleet + serviceCores >= cpuSaturation * Double(machineCores), share < cpuSaturation else { return nil }
        return "pushfleet's processes saturated this machine: the fleet used \(decimal(fleet)) and its push service \(decimal(serviceCores)) of \(machineCores) cores over the traffic; pushes waited for CPU on pushfleet's side"
    }

    /// The push service is pushfleet's: a backend's push waits for it to be accepted, so a push
    /// service that cannot keep up shows as a slow backend (the `backend` hop) unless said here.
    package static func pushServiceLimits(_ load: RunResult.Generator.PushServiceLoad?) -> [String] {
        guard let load else { return [] }
        var limits: [String] = []
        let consequence = "pushes waited for pushfleet's push service, and the backend hop includes that wait"
        if load.busiestLoopShare >= Self.loopSaturation {
            limits.append("push service saturated: its busiest event loop was busy \(Self.percent(load.busiestLoopShare)) of the traffic; " + consequence)
        }
        // Only for a push service in a process of its own: in the fleet's process its loops are
        // the fleet's too, and what they waited for a core the fleet's own checks judge (its
        // late starts, against the scenario's rule).
        if let demand = load.busiestLoopDemand, load.processCoreShare != nil, load.busiestLoopShare < Self.loopSaturation,
            demand >= Self.loopSaturation
                || (demand - load.busiestLoopShare >= Self.loopWaitLimit && load.busiestLoopShare < Self.starvedRunRatio * demand)
        {
            limits.append(
                "push service starved: its busiest event loop wanted a core \(Self.percent(demand)) of the traffic and ran \(Self.percent(load.busiestLoopShare)); other processes on its cores, or a CPU quota, held it back; "
                    + consequence
            )
        }
        if let share = load.processCoreShare, let cores = load.processCores, share >= Self.cpuSaturation {
            limits.append(
                "push service's process saturated: it used \(Self.percent(share)) of its \(cores) core\(cores == 1 ? "" : "s") over the traffic; " + consequence
            )
        }
        if load.lateChecks >= Self.lateCheckMinimum, load.lateShare >= Self.lateCheckShare {
            limits.append(
                "push service behind: \(load.lateChecks.grouped) of its event loops' \(load.checks.grouped) timer checks (\(Self.percent(load.lateShare))) woke \(Self.decimal(load.lateThresholdMs)) ms or more late, \(Self.decimal(load.meanLateMs)) ms on average; "
                    + consequence
            )
        }
        return limits
    }

    /// A push service too busy to answer a small request for seconds kept pushes waiting as well.
    package static func pushServiceSilence(seconds: Double) -> String {
        "push service unresponsive: it said its load as the traffic started but gave no answer in \(decimal(seconds)) s as the traffic ended; pushes waited for pushfleet's push service, and the backend hop includes that wait"
    }

    /// Sends dropped at a sender's in-flight limit when, by Little's law, the target's slowest
    /// answer times the offered rate stays under half that limit: the target did not fill it.
    /// A send that got no answer may have hung for its whole timeout: then the target did.
    private func droppedWhileFast(_ state: Recorder.State, histograms: [String: LatencyHistogram], trafficSeconds: Double) -> Int {
        let dropped = state.live.sendsDropped
        guard dropped > 0, state.unanswered == 0, trafficSeconds > 0, let limit = scenario.traffic.map(\.maxInFlight).min(),
            let slowest = histograms[MetricName.send + ".raw"]?.max
        else { return 0 }
        let offered = Double(state.ledger.sendsRecorded + dropped) / trafficSeconds
        return offered * Double(slowest) / 1e9 < Double(limit) / 2 ? dropped : 0
    }

    static func percent(_ share: Double) -> String { decimal(share * 100) + "%" }
    static func decimal(_ value: Double) -> String { String(format: "%.1f", value) }
    static func ms(_ nanoseconds: Int64) -> String { String(format: "%.0f ms", Double(nanoseconds) / 1e6) }
}
