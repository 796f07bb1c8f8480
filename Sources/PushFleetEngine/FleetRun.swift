import Foundation
import Logging
import NIOCore
import PushFleetClients
import PushFleetCore
import PushFleetLedger
import PushFleetMetrics
import PushFleetResults
import Synchronization

/// One run, in four named phases inside one task group:
/// - **arrive**: devices are released at their arrival times and set up (login, connect,
///   register); the phase ends when every device is ready or failed.
/// - **traffic**: the senders, faults and departures play their schedules.
/// - **drain**: the run listens for late pushes until everything expected has settled or the
///   deadline (and grace) has passed.
/// - **finish**: listening stops, the fleet winds down, every event is applied, the ledger is
///   judged and the result built.
///
/// Beside the phases, the same group runs the recorder (applying events in batches), the fleet
/// (device tasks, push channels, renewals), the progress line and the stop watcher. Every
/// instant and every wait goes through the context's clock.
struct FleetRun: Sendable {
    let scenario: Scenario
    let plan: FleetPlan
    let options: FleetRunner.Options
    let context: RunContext
    let recorder: Recorder
    let events: EventPipe
    let devices: [VirtualDevice]
    /// Each device's own HTTP pool with `http: per_device`; empty otherwise.
    let ownClients: [BackendClient]
    let setup: SetupTracker
    /// The arrival loop's and the renewals' waits, which a stop request interrupts.
    let arrivals = InterruptibleWaits()
    let renewals = InterruptibleWaits()
    /// Wall-clock nanoseconds at the start, to name when the run happened.
    let startedWall: Int64
    /// The phase the live page names, and when the traffic started (run clock).
    let livePhase = LivePhase()

    /// When each phase boundary fell, on the run's clock.
    struct Timeline {
        var trafficStart: Int64 = 0
        var trafficEnd: Int64 = 0
        var listeningEnded: Int64 = 0
        /// CPU the process used over the traffic, in cores (real time, whatever the run's clock).
        var cpuCores: Double?
        /// The longest an event waited for the recorder during the traffic (ns).
        var eventLag: Int64 = 0
        /// The push service's event loops over the traffic, when it said.
        var pushServiceLoad: RunResult.Generator.PushServiceLoad?
        /// How long the push service went unanswered as the traffic ended (s), when it said its
        /// load as the traffic started.
        var pushServiceSilentSeconds: Double?
    }

    /// The tasks that run beside the phases.
    private enum Role {
        case recorder, fleet, progress, stopWatch, pushWatch, network
    }

    init(
        scenario: Scenario, plan: FleetPlan, system: SystemUnderTest, options: FleetRunner.Options, stop: StopControl, network: NetworkFaultPlan? = nil,
        phoneProxy: PhoneLinkProxy? = nil
    ) {
        self.scenario = scenario
        self.plan = plan
        self.options = options
        let clock = options.clock
        startedWall = clock.wallNow()
        let start = clock.now()
        options.tape?.begin(originMonotonic: start, originWall: startedWall)
        // A shard's material is judged only when merged, and a run judged in windows judges what it
        // holds: neither folds.
        // A run with network faults judges each fault's window at the end, so it keeps every send.
        let folds = options.shard.isWhole && options.judgedWindow == nil && network == nil
        recorder = Recorder(
            users: plan.users, start: start, metrics: options.metrics, tape: options.tape, shard: options.shard, horizon: scenario.horizon,
            folding: folds ? .init(deadline: scenario.deadline, horizon: scenario.horizon) : nil
        )
        options.metrics?.setDevicesPlanned(plan.devices.count)
        // Exemplars name this run's traces, when its requests carry them.
        options.metrics?.setExemplarSource(
            scenario.tracing.propagate ? .init(run: plan.runID, tracing: scenario.tracing, deadline: scenario.deadline) : nil
        )
        // The token as the push service knows it (a WNS channel's id), to match its reports.
        for device in plan.devices { recorder.addDevice(.init(user: device.user, platform: device.platform, token: device.token)) }
        let reader = DeliveryLedger.PushReader(layouts: scenario.api?.receive.layouts ?? [:], run: plan.runID)
        recorder.setPushReader(reader)
        // Real time, whatever the run's clock: the lag is the machine's.
        events = EventPipe(now: MonotonicClock.nanoseconds)
        let sources = Self.sourceAddresses(scenario, plan, pushServiceURL: system.pushService, progress: options.progress)
        let context = RunContext(
            spec: RunSpec(scenario: scenario, plan: plan, shard: options.shard),
            time: RunTime(clock: clock, start: start),
            signals: RunSignals(events: events, stop: stop),
            services: FleetServices(
                system: system, connections: scenario.fleet.connections, sourceAddresses: sources, trace: options.trace,
                browsers: plan.devices.contains { $0.platform == .webpush }, clock: clock, logger: options.logger, network: network,
                phoneProxy: phoneProxy
            )
        )
        self.context = context
        // A shard plays only its own devices; the ledger knows them all.
        let played = plan.devices.filter { options.shard.owns(device: $0.index) }
        // Empty unless every device has a pool of its own.
        let ownClients: [BackendClient] = scenario.fleet.http != .perDevice ? [] : played.map { device in
            BackendClient(
                baseURL: system.backend, connections: 1, sourceAddresses: context.services.sourceAddress(device.index).map { [$0] } ?? [], clock: clock
            )
        }
        self.ownClients = ownClients
        devices = played.indices.map {
            VirtualDevice(plan: played[$0], context: context, http: ownClients.isEmpty ? nil : ownClients[$0])
        }
        setup = SetupTracker(total: devices.count, limit: options.setupsInFlight ?? Self.setupLimit(scenario.fleet))
    }

    /// Setups past what the pool can serve would only wait in its queue, each holding a task
    /// and a request: four per pooled connection keep it busy. Devices with their own
    /// connections really do set up side by side.
    static func setupLimit(_ fleet: Scenario.Fleet) -> Int {
        fleet.http == .perDevice ? 4096 : max(256, 4 * fleet.connections)
    }

    func play(stop: StopControl) async -> RunResult {
        var timeline = Timeline()
        await withTaskGroup(of: Role.self) { group in
            group.addTask {
                await events.consume(into: recorder)
                return .recorder
            }
            group.addTask {
                await fleet()
                return .fleet
            }
            group.addTask {
                await reportProgress()
                return .progress
            }
            group.addTask {
                await watch(stop)
                return .stopWatch
            }
            // The push service is watched before the first device arrives.
            let watching = Latch()
            group.addTask {
                await PushServiceWatcher(context: context).run(ready: watching.open)
                return .pushWatch
            }
            await watching.wait()

            await arrive()
            // Read before the gate: a shard's traffic starts at the gate's instant, not after a
            // request to the push service that may take seconds on a loaded machine.
            let loadBefore = await readPushServiceLoad(stop, into: &timeline)
            await beforeTraffic()
            await waitForTrafficGate(stop)
            timeline.trafficStart = context.now()
            livePhase.state.withLock { $0 = ("traffic", timeline.trafficStart) }
            // Network faults act on links the shards share: one plays them, beside the traffic
            // and through the drain (a partition may outlast the sends).
            var emitting = 4
            let proxy = context.services.phoneProxy
            if let network = context.services.network, options.shard.index == 0 || proxy != nil {
                emitting += 1
                group.addTask { [trafficStart = timeline.trafficStart, owner = options.shard.index == 0] in
                    await NetworkFaultRunner(plan: network, owner: owner, proxy: proxy).run(context, trafficStart: trafficStart)
                    return .network
                }
            }
            let cpuBefore = (CPUTime.own(), ContinuousClock.now)
            events.resetLag()
            timeline.trafficEnd = await traffic(startingAt: timeline.trafficStart)
            let wall = (ContinuousClock.now - cpuBefore.1) / .seconds(1)
            if wall >= 0.5 { timeline.cpuCores = (CPUTime.own() - cpuBefore.0) / wall }
            // The drain judges under the recorder's lock; only the traffic's lag is the generator's.
            timeline.eventLag = events.longestLag
            if let loadBefore, stop.level < .aborting { await readPushServiceLoad(since: loadBefore, stop, into: &timeline) }
            if context.isStopping { context.emit(.marker("stop requested", at: timeline.trafficEnd)) }
            livePhase.state.withLock { $0.phase = "draining" }
            let listen = stop.level >= .stopping ? scenario.deadline : scenario.deadline + scenario.grace
            await drain(stop, until: timeline.trafficEnd + listen.nanoseconds)
            timeline.listeningEnded = context.now()
            await afterDrain()
            if options.departAtEnd && stop.level == .running {
                await withDiscardingTaskGroup { departing in
                    for device in devices { departing.addTask { await device.depart(context) } }
                }
            }

            // Finish: no new work; an abort also stops recording and closes the fleet's
            // connections so requests in flight end now rather than at their timeouts.
            context.signals.runEnding()
            for device in devices { device.retireChannel() }
            if stop.level >= .aborting {
                events.finish()
                await shutDownClients()
            }
            group.cancelAll()
            // The recorder ends last: once everything that emits has ended, nothing more comes.
            while let role = await group.next() {
                guard role != .recorder else { continue }
                emitting -= 1
                if emitting == 0 { events.finish() }
            }
        }
        if stop.level < .aborting { await shutDownClients() }
        return result(timeline, stop: stop)
    }

    /// The shards of a run start their traffic together: the gate says when (or why not). A
    /// stop request ends the wait: a shard told to stop must not wait out the other shards.
    /// The push service's loops over the traffic. Asked longer than as the traffic started: a
    /// saturated service answers late, and its silence is a finding too, never a reason to make
    /// no claim.
    private func readPushServiceLoad(since before: PushServiceLoadReading, _ stop: StopControl, into timeline: inout Timeline) async {
        let system = context.services.system
        guard let after = await readPushServiceLoad(stop, into: &timeline) else { return }
        timeline.pushServiceLoad = after.since(
            before, inFleetProcess: system.pushWatch != nil, onFleetMachine: Origin(system.pushService)?.isLoopback ?? false
        )
    }

    /// One reading, asked as often at the traffic's start as at its end: a loaded machine's
    /// first answer may take seconds, and a reading missed there would leave the run without one.
    private func readPushServiceLoad(_ stop: StopControl, into timeline: inout Timeline) async -> PushServiceLoadReading? {
        let attempts = stop.level >= .stopping ? 1 : PushServiceLoadReading.attempts
        switch await PushServiceLoadReading.read(context.services.system, clock: context.clock, timeout: PushServiceLoadReading.timeout, attempts: attempts) {
        case .reading(let reading): return reading
        case .silent: timeline.pushServiceSilentSeconds = Double(attempts) * (PushServiceLoadReading.timeout / .seconds(1))
        case .unsaid: break
        }
        return nil
    }

    private func waitForTrafficGate(_ stop: StopControl) async {
        guard let gate = options.trafficGate, !context.isStopping else { return }
        let context = context
        let decision = await withTaskGroup(of: TrafficGate?.self) { group in
            group.addTask { await gate() }
            group.addTask {
                await stop.reached(.stopping)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        switch decision {
        case .startAt(let wall):
            _ = await context.sleep(until: context.now() + (wall - context.clock.wallNow()))
        case .stop(let reason):
            _ = stop.escalate(reason: reason)
        case nil:
            break
        }
    }

    private func shutDownClients() async {
        await context.services.backend.shutdown()
        await context.services.webPush?.pushService.shutdown()
        for client in ownClients { await client.shutdown() }
    }

    // MARK: Beside the phases

    /// Ends the arrivals and renewals and releases the devices waiting for a setup slot at the
    /// first stop request; returns early when the run ends without one.
    private func watch(_ stop: StopControl) async {
        await stop.reached(.stopping)
        guard !Task.isCancelled else { return }
        arrivals.interrupt()
        renewals.interrupt()
        setup.releaseAll()
    }

    private func reportProgress() async {
        // A shard's ledger holds only its part, which only the merge judges; a capacity step is
        // judged over its own window, and its search decides: neither judges live to stop.
        let whole = options.shard.isWhole
        let aborting = whole && options.judgedWindow == nil && scenario.effectiveThresholds.contains { $0.abortOnFail != nil }
        // Judged as the run goes for the page, for rules that may stop it, and for the live
        // metrics' pair counts.
        let judging = whole && (options.live != nil || aborting || options.metrics != nil)
        guard options.progress != nil || judging else { return }
        var previousSends = 0
        var next = context.time.start
        var liveCursor = ResultBuilder.LiveCursor()
        var nextJudgement = Int64.min
        var cpu = (CPUTime.own(), ContinuousClock.now)
        while true {
            next += 1_000_000_000
            do { try await context.clock.sleep(until: next) } catch { return }
            if judging {
                var frame = liveFrame(cursor: &liveCursor, nextJudgement: &nextJudgement)
                let now = (CPUTime.own(), ContinuousClock.now)
                let wall = (now.1 - cpu.1) / .seconds(1)
                if wall > 0.1 { frame.generator.cpuCores = (now.0 - cpu.0) / wall }
                cpu = now
                options.live?(frame)
                if let judged = frame.judged {
                    options.metrics?.setOutcomes(judged.soFarDelivery)
                    if aborting { abortOnFail(judged, at: frame.second) }
                }
            }
            guard let progress = options.progress else { continue }
            let live = recorder.live
            let elapsed = Double(context.now() - context.time.start) / 1e9
            progress(
                String(
                    format: "[%6.1fs] devices %d/%d ready, %d failed | sends %d (%d/s), dropped %d, failed %d | received %d | errors %d | send p99 %.1fms",
                    elapsed, live.devicesReady, devices.count, live.devicesFailed, live.sends, live.sends - previousSends, live.sendsDropped,
                    live.sendFailures, live.received, live.errors, Double(live.sendP99) / 1e6
                )
            )
            previousSends = live.sends
        }
    }

    /// Stops the run at the first rule with `abort_on_fail` that fails over the window, once its
    /// delay after the traffic's start has passed: arrivals and sends end, the pairs in flight are
    /// listened for, and the reports are written, the rule named.
    private func abortOnFail(_ judged: LiveFrame.Judged, at second: Double) {
        guard abortedRule == nil, let trafficStart = livePhase.state.withLock({ $0.trafficStart }) else { return }
        let sinceTraffic = context.now() - trafficStart
        let rules = scenario.effectiveThresholds
        for (rule, judgedRule) in zip(rules, judged.rules) where judgedRule.windowFailed {
            guard let abort = rule.abortOnFail, sinceTraffic >= abort.delay.nanoseconds else { continue }
            let name = "\(rule.metric): \(rule.expression)"
            let measured = judgedRule.windowMeasured.map { String(format: "%.3f", $0) + judgedRule.unit } ?? "no data"
            livePhase.abortedBy.withLock { $0 = name }
            _ = context.signals.stop.escalate(
                reason: "\(name) failed over its window (measured \(measured), sends of \(String(format: "%.1f", judged.windowStart))–\(String(format: "%.1f", judged.windowEnd)) s) at \(String(format: "%.1f", second)) s: abort_on_fail"
            )
            return
        }
    }

    var abortedRule: String? { livePhase.abortedBy.withLock { $0 } }

    /// This second's frame of the live page, with a judgement when one is due: no sooner than
    /// twenty times the last one's cost, so judging takes at most a twentieth of a core.
    private func liveFrame(cursor: inout ResultBuilder.LiveCursor, nextJudgement: inout Int64) -> LiveFrame {
        let builder = ResultBuilder(scenario: scenario, plan: plan, recorder: recorder)
        let now = context.now()
        let (phase, trafficStart) = livePhase.state.withLock { $0 }
        var frame = builder.liveFrame(now: now, phase: phase, eventLag: events.longestLag, cursor: &cursor)
        if let trafficStart, now >= nextJudgement {
            frame.judged = builder.liveJudgement(now: now, trafficStart: trafficStart, window: options.liveWindow)
            let cost = Int64((frame.judged?.costMs ?? 0) * 1e6)
            nextJudgement = now + max(1_000_000_000, 20 * cost) - 100_000_000
        }
        return frame
    }
}

/// The phase the live page names, and when the traffic started (run clock), shared between the
/// phases and the live frames.
final class LivePhase: Sendable {
    let state = Mutex<(phase: String, trafficStart: Int64?)>(("arriving", nil))
    /// The rule (`metric: expression`) that stopped the run, failed over its window.
    let abortedBy = Mutex<String?>(nil)
}
