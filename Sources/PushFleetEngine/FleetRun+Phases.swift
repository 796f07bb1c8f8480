import Foundation
import NIOCore
import PushFleetClients
import PushFleetCore
import PushFleetMetrics
import PushFleetResults
import Synchronization

extension FleetRun {
    // MARK: Arrive

    /// Waits until every device is set up (or the run is stopping).
    func arrive() async {
        await setup.waitForAll()
    }

    /// Gives a benchmark its moment just before the traffic: nothing that takes time (the push
    /// service's reading, a shard's gate) comes between it and the traffic's start but the gate.
    func beforeTraffic() async {
        if let beforeTraffic = options.beforeTraffic, !context.isStopping { await beforeTraffic() }
    }

    /// Gives a benchmark its moment at the drain's end, before anything disconnects.
    func afterDrain() async {
        if let afterDrain = options.afterDrain { await afterDrain() }
    }

    /// The fleet: every device (and shared channel) is a child of one discarding group, so one
    /// cancellation reaches all of them. One loop releases devices at their arrival times; a
    /// device's task starts when it arrives and a setup slot is free (``SetupTracker``), so a
    /// fleet waiting to arrive, or arriving faster than it can be set up, costs no tasks.
    func fleet() async {
        await withDiscardingTaskGroup { group in
            let count = max(1, min(16, (devices.count + 4999) / 5000))
            let channels = scenario.fleet.pushChannel == .multiplexed
                ? (0..<count).map {
                    MuxChannel(pushServiceURL: context.services.pushServiceURL, loop: context.services.eventLoops.next(), seed: scenario.seed ^ 0x6A7E ^ UInt64($0))
                } : []
            for channel in channels { group.addTask(executorPreference: EventLoopExecutor(channel.loop)) { await channel.run(context) } }
            if channels.isEmpty { group.addTask { await context.services.deviceWork.run(context) } }
            if let every = scenario.fleet.reregisterEvery {
                group.addTask { await renewPeriodically(every: every) }
            }
            var held = false
            for device in devices.sorted(by: { $0.plan.arrival < $1.plan.arrival }) {
                let intended = context.time.start + device.plan.arrival
                guard await context.pace(until: intended, arrivals) else { break }
                guard case .admitted(let waited) = await setup.admit() else { break }
                if waited && !held {
                    held = true
                    context.emit(.marker("\(setup.limit) devices setting up: arrivals wait their turn", at: intended))
                }
                if !channels.isEmpty { device.joined(channels[device.plan.index % count]) }
                group.addTask { await device.arrive(context, setup: setup, intended: intended) }
            }
        }
    }

    /// Each device renews its registration every `every` from its arrival: devices are walked
    /// in the order of their arrival modulo the interval, one round per interval, so one task
    /// drives them all.
    func renewPeriodically(every: Duration) async {
        let interval = every.nanoseconds
        guard interval > 0, !devices.isEmpty else { return }
        let byPhase = devices.sorted { $0.plan.arrival % interval < $1.plan.arrival % interval }
        await withDiscardingTaskGroup { group in
            var round: Int64 = 0
            while !context.isStopping {
                for device in byPhase {
                    let due = context.time.start + round * interval + device.plan.arrival % interval
                    // Its first renewal comes a whole interval after its arrival.
                    guard due > context.time.start + device.plan.arrival else { continue }
                    if due > context.now() + 1_000_000 {
                        guard await context.pace(until: due, renewals) else { return }
                    }
                    group.addTask { await device.renewRegistration(context) }
                }
                // A fleet too large to renew this often skips rounds rather than piling them up.
                round = max(round + 1, (context.now() - context.time.start) / interval)
            }
        }
    }

    // MARK: Traffic

    /// Plays the senders, the fault steps and the departure from `trafficStart`; returns when the
    /// last sender is done.
    func traffic(startingAt trafficStart: Int64) async -> Int64 {
        context.signals.trafficStart.store(trafficStart, ordering: .relaxed)
        context.emit(.marker("traffic starts", at: trafficStart))
        // Ramp stages, marked where each begins so the charts show the load steps.
        for traffic in scenario.traffic where traffic.profile.stages.count > 1 {
            var offset = trafficStart + traffic.start.nanoseconds
            for stage in traffic.profile.stages {
                context.emit(.marker("\(traffic.name) → \(stage.target)", at: offset))
                offset += stage.duration.nanoseconds
            }
        }
        guard !context.isStopping else { return context.now() }
        let stop = context.signals.stop
        let pacing = scenario.traffic.map { _ in InterruptibleWaits() }
        await withTaskGroup(of: Bool.self) { group in
            // A stop request ends the senders' pacing at once (their sends in flight finish);
            // the faults and the departure wait on the stop themselves.
            group.addTask {
                await stop.reached(.stopping)
                for waits in pacing { waits.interrupt() }
                return false
            }
            // Faults end with the traffic: a backend restart still under way is no longer waited for.
            // Faults act on the system under test, which the shards share: one plays them.
            if options.shard.index == 0 {
                group.addTask {
                    await FaultScheduler(steps: scenario.faults).run(context, trafficStart: trafficStart)
                    return false
                }
            }
            for (index, traffic) in scenario.traffic.enumerated() {
                // On an event loop: its sends wait on the loop's timer and are written and
                // answered on the loop's connections, without waking another thread.
                group.addTask(executorPreference: EventLoopExecutor(context.services.eventLoops.next())) {
                    await TrafficSender(traffic: traffic, index: index, names: scenario.fleet.names, shard: options.shard)
                        .run(context, trafficStart: trafficStart, waits: pacing[index])
                    return true
                }
            }
            if let departure = scenario.fleet.departure {
                group.addTask {
                    await depart(departure, trafficStart: trafficStart)
                    return true
                }
            }
            var playing = scenario.traffic.count + (scenario.fleet.departure == nil ? 0 : 1)
            while playing > 0, let isTraffic = await group.next() {
                if isTraffic { playing -= 1 }
            }
            group.cancelAll()
        }
        return context.now()
    }

    private func depart(_ departure: Scenario.Departure, trafficStart: Int64) async {
        guard await context.sleep(until: trafficStart + departure.at.nanoseconds) else { return }
        context.emit(.marker("departure of \(Int(departure.share * 100))% of devices", at: context.now()))
        // Drawn over the whole plan, so the shards' departures add up to the single run's.
        var rng = SplitMix64(seed: scenario.seed ^ 0xDE9A)
        let chosen = Set(plan.devices.indices.filter { _ in rng.nextUnit() < departure.share })
        let leaving = devices.filter { chosen.contains($0.plan.index) }
        await withDiscardingTaskGroup { inner in
            for device in leaving { inner.addTask { await device.depart(context) } }
        }
    }

    // MARK: Drain

    /// Listens for late pushes after the last send until `deadline`, or until every event has
    /// been applied, no push is being handled, none has arrived for the quiet period, and
    /// every expected pair is settled: a misdelivery or duplicate arriving after the last
    /// expected push is still seen.
    ///
    /// "Settled" is the ledger's running count of pairs still awaited; the whole ledger is
    /// judged only to confirm a count of zero (or when the count cannot tell), at most once per
    /// four times what a judgement costs.
    ///
    /// A shard listens to the end: pushes for its devices may come from other shards' sends,
    /// which its ledger cannot await.
    ///
    /// Nothing polls: each look at what is unsettled names what it waits for — the quiet
    /// period's end or the next confirmation (a time), the last push in hand handled or the
    /// recorder caught up (a ``DrainSignal`` poke) — and the deadline or an abort end any wait.
    func drain(_ stop: StopControl, until deadline: Int64) async {
        let signal = events.drainSignal
        signal.arm()
        let quiet = scenario.quietPeriod.nanoseconds
        var nextConfirm: Int64 = 0
        while context.now() < deadline && stop.level < .aborting {
            let seen = signal.pokes
            let now = context.now()
            guard options.shard.isWhole else {
                await settle(stop, seen: seen, until: deadline, poked: false)
                continue
            }
            let quietEnd = context.signals.lastPushArrival.load(ordering: .relaxed) + quiet
            if now < quietEnd {
                await settle(stop, seen: seen, until: min(deadline, quietEnd), poked: false)
                continue
            }
            let emitted = context.signals.emitted
            let (applied, awaited) = recorder.settlement()
            // A push in hand, events not yet applied or pairs still awaited: the next handled
            // push or the recorder catching up may settle it.
            if context.signals.pushesInHand.load(ordering: .relaxed) > 0 || applied != emitted || awaited ?? 0 > 0 {
                await settle(stop, seen: seen, until: deadline, poked: true)
                continue
            }
            if now < nextConfirm {
                await settle(stop, seen: seen, until: min(deadline, nextConfirm), poked: true)
                continue
            }
            let began = context.now()
            let lost = recorder.lost(ifApplied: emitted, deadline: scenario.deadline)
            nextConfirm = now + max(100_000_000, 4 * (context.now() - began))
            if lost == 0 { return }
            await settle(stop, seen: seen, until: min(deadline, nextConfirm), poked: true)
        }
    }

    /// Waits until `wake`, a poke after `seen` (when `poked`), or an abort, whichever is first.
    private func settle(_ stop: StopControl, seen: UInt64, until wake: Int64, poked: Bool) async {
        let context = context
        let signal = events.drainSignal
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = try? await context.clock.sleep(until: wake) }
            group.addTask { await stop.reached(.aborting) }
            if poked { group.addTask { await signal.wait(after: seen) } }
            await group.next()
            group.cancelAll()
        }
    }

    // MARK: Finish

    func result(_ timeline: Timeline, stop: StopControl) -> RunResult {
        let provenance = options.provenance
        var info = RunResult.Info(
            tool: "pushfleet", version: provenance.version, runID: plan.runID, scenario: scenario.name,
            scenarioFile: provenance.scenarioFile, scenarioText: provenance.scenarioText, seed: scenario.seed,
            target: FleetRunner.describe(scenario.target), backendURL: context.services.system.backend, pushServiceURL: context.services.system.pushService,
            host: provenance.host.name, cores: provenance.host.cores, memoryBytes: provenance.host.memoryBytes, os: provenance.host.os,
            startedAt: FleetRunner.iso(startedWall), endedAt: FleetRunner.iso(context.clock.wallNow()),
            durationSeconds: Double(context.now() - context.time.start) / 1e9, aborted: stop.level >= .stopping, abortReason: stop.reason,
            trafficStartSecond: Double(timeline.trafficStart - context.time.start) / 1e9,
            trafficEndSecond: Double(timeline.trafficEnd - context.time.start) / 1e9
        )
        info.traceContext = scenario.tracing.propagate
        info.abortedBy = abortedRule
        info.startedAtNanoseconds = startedWall
        var builder = ResultBuilder(scenario: scenario, plan: plan, recorder: recorder)
        if stop.level >= .aborting { builder.listeningEnded = timeline.listeningEnded }
        builder.generatorLoad = .init(
            eventLag: timeline.eventLag, cpuCores: timeline.cpuCores, cores: provenance.host.cores, pushService: timeline.pushServiceLoad,
            pushServiceSilentSeconds: timeline.pushServiceSilentSeconds
        )
        builder.judgesLedger = options.shard.isWhole
        if let network = context.services.network, timeline.trafficStart > 0 { builder.networkFaults = (network, timeline.trafficStart) }
        if let span = options.judgedWindow {
            builder.judgedWindow = (timeline.trafficStart + span.lowerBound.nanoseconds)..<(timeline.trafficStart + span.upperBound.nanoseconds)
        }
        let result = builder.build(info: info)
        options.metrics?.setOutcomes(result.delivery, byPlatform: result.deliveryByPlatform)
        return result
    }

    // MARK: Sockets

    /// The scenario's source addresses; without any, loopback ones when a loopback push service
    /// must take more device sockets than one source address has ephemeral ports.
    static func sourceAddresses(
        _ scenario: Scenario, _ plan: FleetPlan, pushServiceURL: String, progress: (@Sendable (String) -> Void)?
    ) -> [SocketAddress] {
        if !scenario.fleet.sourceAddresses.isEmpty {
            return scenario.fleet.sourceAddresses.compactMap { try? SocketAddress(ipAddress: $0, port: 0) }
        }
        let sockets = scenario.fleet.pushChannel == .perDevice && scenario.lifecycle.contains(.connect) ? plan.devices.count : 0
        let usable = Int(Double(EphemeralPorts.count()) * 0.9)
        guard sockets > usable, Origin(pushServiceURL)?.host.hasPrefix("127.") == true else { return [] }
        let count = (sockets + usable - 1) / usable
        progress?("\(sockets) device sockets to one loopback address need more than \(usable) ephemeral ports: spreading them over 127.0.0.1–127.0.0.\(count)")
        return (1...count).compactMap { try? SocketAddress(ipAddress: "127.0.0.\($0)", port: 0) }
    }
}
