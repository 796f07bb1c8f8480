public import Logging
public import PushFleetCore
import Foundation
import NIOCore
import NIOHTTP1
import Prometheus
import PushFleetBackend
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetWire
import PushFleetServerSupport
import ServiceLifecycle
import Synchronization

/// Plays a scenario: brings up the target, ramps the fleet, runs the senders and faults, drains,
/// and returns everything measured.
public struct FleetRunner: Sendable {
    public struct Options: Sendable {
        public var scenarioFile: String
        public var scenarioText: String
        public var version: String
        public var logger: Logger
        /// Receives a progress line about once a second.
        public var progress: (@Sendable (String) -> Void)?
        /// Called once the fleet is in and before traffic starts (benchmarks sample memory here).
        public var beforeTraffic: (@Sendable () async -> Void)?
        /// Live Prometheus metrics to keep up to date, if any.
        public var metrics: LiveMetrics?
        /// The run id (hex digits); random when nil. Fixed only to reproduce a run's tokens.
        public var runID: String?

        public init(
            scenarioFile: String, scenarioText: String, version: String, logger: Logger, progress: (@Sendable (String) -> Void)? = nil
        ) {
            self.scenarioFile = scenarioFile
            self.scenarioText = scenarioText
            self.version = version
            self.logger = logger
            self.progress = progress
        }
    }

    public let scenario: Scenario
    public let options: Options

    public init(scenario: Scenario, options: Options) {
        self.scenario = scenario
        self.options = options
    }

    struct Endpoints {
        var backend: String
        var pushService: String
    }

    /// Runs the scenario to its end, or until `stop` says so.
    public func run(stop: StopControl = StopControl()) async throws -> RunResult {
        var logger = options.logger
        logger.logLevel = max(logger.logLevel, .warning)
        switch scenario.target {
        case .embedded:
            var configuration = EmbeddedSystem.Configuration()
            configuration.backend.registrationTTL = scenario.embedded.registrationTTL
            configuration.backend.store = scenario.embedded.store
            // `sqlite:` with no path: a fresh file for this run only.
            var temporaryStore: URL?
            if case .sqlite(let path) = scenario.embedded.store, path.isEmpty {
                let url = FileManager.default.temporaryDirectory.appendingPathComponent("pushfleet-\(UUID().uuidString).sqlite")
                configuration.backend.store = .sqlite(path: url.path)
                temporaryStore = url
            }
            defer {
                if let temporaryStore {
                    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: temporaryStore.path + suffix) }
                }
            }
            if let credentials = scenario.fleet.names.credentials {
                configuration.backend.users = UserDirectory(passwords: credentials.map { ($0.user, $0.password) })
            }
            if let tls = scenario.embedded.tls {
                configuration.pushServer.tls = try EmbeddedSystem.tlsListener(listen: tls.listen, names: tls.names, caFile: tls.caFile)
                configuration.backendUsesTLS = true
            }
            let faults = configuration.backend.faults
            return try await EmbeddedSystem.withRunning(configuration, logger: logger) { system, endpoints in
                try await play(
                    Endpoints(backend: endpoints.backend, pushService: endpoints.pushService), stop: stop,
                    restartBackend: { down in try await system.restartBackend(downFor: down) }, backendFaults: faults,
                    pushAdminToken: system.pushServer?.configuration.adminToken
                )
            }
        case .external(let backend, .url(let pushService)):
            return try await play(Endpoints(backend: backend, pushService: pushService), stop: stop)
        case .external(let backend, .embedded(let listen)):
            let tls = try scenario.embedded.tls.map { try EmbeddedSystem.tlsListener(listen: $0.listen, names: $0.names, caFile: $0.caFile) }
            let server = MockPushServer(service: PushService(), configuration: .init(listen: try .init(parsing: listen), tls: tls))
            let group = ServiceGroup(configuration: .init(services: server.makeServices(logger: logger).map { .init(service: $0) }, logger: logger))
            return try await withThrowingTaskGroup(of: RunResult?.self) { tasks in
                tasks.addTask {
                    try await group.run()
                    return nil
                }
                tasks.addTask {
                    let pushService = try await server.bound.value().httpURL
                    return try await play(
                        Endpoints(backend: backend, pushService: pushService), stop: stop, pushAdminToken: server.configuration.adminToken
                    )
                }
                defer { tasks.cancelAll() }
                guard let result = try await tasks.next() ?? nil else { throw EmbeddedSystem.ServerStoppedError() }
                await group.triggerGracefulShutdown()
                return result
            }
        }
    }

    private func play(
        _ endpoints: Endpoints, stop: StopControl, restartBackend: (@Sendable (Duration) async throws -> Void)? = nil,
        backendFaults: BackendFaults? = nil, pushAdminToken: String? = nil
    ) async throws -> RunResult {
        let runID = options.runID ?? Self.makeRunID()
        let plan = FleetPlan(scenario: scenario, runID: runID)
        let startedAt = Date()
        let start = MonotonicClock.nanoseconds()
        let recorder = Recorder(users: plan.users, start: start, metrics: options.metrics)
        options.metrics?.devicesPlanned.set(to: Double(plan.devices.count))
        for device in plan.devices { recorder.addDevice(.init(user: device.user, platform: device.platform)) }
        let (events, sink) = AsyncStream<RunEvent>.makeStream()
        let sources = sourceAddresses(plan, pushServiceURL: endpoints.pushService)
        let backend = BackendClient(baseURL: endpoints.backend, connections: scenario.fleet.connections, sourceAddresses: sources)
        let context = RunContext(
            scenario: scenario, plan: plan, backend: backend, pushServiceURL: endpoints.pushService, start: start, events: sink,
            logger: options.logger, runID: runID, sourceAddresses: sources, restartBackend: restartBackend,
            backendFaults: backendFaults, pushAdminToken: pushAdminToken
        )
        let ownClients: [BackendClient?] = plan.devices.map { device in
            guard scenario.fleet.http == .perDevice else { return nil }
            return BackendClient(baseURL: endpoints.backend, connections: 1, sourceAddresses: context.sourceAddress(device.index).map { [$0] } ?? [])
        }
        let devices = plan.devices.enumerated().map { index, device in
            VirtualDevice(plan: device, names: scenario.fleet.names, http: ownClients[index])
        }
        let setup = SetupTracker(total: devices.count)
        let consumer = Task {
            for await event in events { recorder.apply([event]) }
        }
        let progress = Task { await reportProgress(recorder, context: context, total: devices.count) }

        // The fleet: every device (and shared channel) is a child of one discarding group, so
        // one cancellation reaches all of them. One loop releases devices at their arrival
        // times; a device's task starts when it arrives, so a fleet waiting to arrive costs
        // no tasks and no wake-ups.
        let fleet = Task {
            await withDiscardingTaskGroup { group in
                let count = max(1, min(16, (devices.count + 4999) / 5000))
                let channels = scenario.fleet.pushChannel == .multiplexed
                    ? (0..<count).map { _ in MuxChannel(pushServiceURL: endpoints.pushService) } : []
                for channel in channels { group.addTask { await channel.run(context) } }
                if channels.isEmpty { group.addTask { await context.deviceWork.run(context) } }
                if let every = scenario.fleet.reregisterEvery {
                    group.addTask { await Self.renewPeriodically(devices, every: every, context) }
                }
                for device in devices.sorted(by: { $0.plan.arrival < $1.plan.arrival }) {
                    guard await context.sleep(until: context.start + device.plan.arrival) else { break }
                    if channels.isEmpty {
                        group.addTask { await device.runWithOwnChannel(context, setup: setup) }
                    } else {
                        group.addTask { await device.runOnSharedChannel(channels[device.plan.index % count], context, setup: setup) }
                    }
                }
            }
        }
        let stopWatcher = Task {
            while !Task.isCancelled {
                if stop.level >= .stopping {
                    context.stopping.store(true, ordering: .relaxed)
                    setup.releaseAll()
                    return
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
        }

        await setup.waitForAll()
        if let beforeTraffic = options.beforeTraffic, !context.isStopping { await beforeTraffic() }
        let trafficStart = MonotonicClock.nanoseconds()
        context.trafficStart.store(trafficStart, ordering: .relaxed)
        context.emit(.marker("traffic starts", at: trafficStart))
        // Ramp stages, marked where each begins so the charts show the load steps.
        for traffic in scenario.traffic where traffic.profile.stages.count > 1 {
            var offset = trafficStart + traffic.start.nanoseconds
            for stage in traffic.profile.stages {
                context.emit(.marker("\(traffic.name) → \(stage.target)", at: offset))
                offset += stage.duration.nanoseconds
            }
        }
        await runTraffic(context, trafficStart: trafficStart, devices: devices)
        let trafficEnd = MonotonicClock.nanoseconds()
        if context.isStopping { context.emit(.marker("stop requested", at: trafficEnd)) }
        await drain(
            recorder, context: context, stop: stop,
            until: trafficEnd + (stop.level >= .stopping ? scenario.deadline : scenario.deadline + scenario.grace).nanoseconds
        )

        let listeningEnded = MonotonicClock.nanoseconds()
        context.stopping.store(true, ordering: .relaxed)
        for device in devices { device.retireChannel() }
        fleet.cancel()
        stopWatcher.cancel()
        if stop.level < .aborting { await fleet.value }
        progress.cancel()
        sink.finish()
        await consumer.value
        await backend.shutdown()
        for client in ownClients { await client?.shutdown() }

        let info = RunResult.Info(
            tool: "pushfleet", version: options.version, runID: runID, scenario: scenario.name, scenarioFile: options.scenarioFile,
            scenarioText: options.scenarioText, seed: scenario.seed, target: Self.describe(scenario.target), backendURL: endpoints.backend,
            pushServiceURL: endpoints.pushService, host: ProcessInfo.processInfo.hostName,
            cores: ProcessInfo.processInfo.activeProcessorCount, memoryBytes: ProcessInfo.processInfo.physicalMemory,
            os: ProcessInfo.processInfo.operatingSystemVersionString, startedAt: Self.iso(startedAt), endedAt: Self.iso(Date()),
            durationSeconds: Double(MonotonicClock.nanoseconds() - start) / 1e9, aborted: stop.level >= .stopping,
            abortReason: stop.reason, trafficStartSecond: Double(trafficStart - start) / 1e9, trafficEndSecond: Double(trafficEnd - start) / 1e9
        )
        var builder = ResultBuilder(scenario: scenario, plan: plan, recorder: recorder)
        if stop.level >= .aborting { builder.listeningEnded = listeningEnded }
        let result = builder.build(info: info)
        options.metrics?.setOutcomes(result.delivery)
        return result
    }

    /// The scenario's source addresses; without any, loopback ones when a loopback push service
    /// must take more device sockets than one source address has ephemeral ports.
    private func sourceAddresses(_ plan: FleetPlan, pushServiceURL: String) -> [SocketAddress] {
        if !scenario.fleet.sourceAddresses.isEmpty {
            return scenario.fleet.sourceAddresses.compactMap { try? SocketAddress(ipAddress: $0, port: 0) }
        }
        let sockets = scenario.fleet.pushChannel == .perDevice && scenario.lifecycle.contains(.connect) ? plan.devices.count : 0
        let usable = Int(Double(EphemeralPorts.count()) * 0.9)
        guard sockets > usable, Origin(pushServiceURL)?.host.hasPrefix("127.") == true else { return [] }
        let count = (sockets + usable - 1) / usable
        options.progress?("\(sockets) device sockets to one loopback address need more than \(usable) ephemeral ports: spreading them over 127.0.0.1–127.0.0.\(count)")
        return (1...count).compactMap { try? SocketAddress(ipAddress: "127.0.0.\($0)", port: 0) }
    }

    private func runTraffic(_ context: RunContext, trafficStart: Int64, devices: [VirtualDevice]) async {
        guard !context.isStopping else { return }
        await withDiscardingTaskGroup { group in
            for (index, traffic) in scenario.traffic.enumerated() {
                group.addTask { await TrafficSender(traffic: traffic, index: index, names: scenario.fleet.names).run(context, trafficStart: trafficStart) }
            }
            if !scenario.faults.isEmpty {
                group.addTask { await FaultScheduler(steps: scenario.faults).run(context, trafficStart: trafficStart) }
            }
            if let departure = scenario.fleet.departure {
                group.addTask {
                    guard await context.sleep(until: trafficStart + departure.at.nanoseconds) else { return }
                    context.emit(.marker("departure of \(Int(departure.share * 100))% of devices", at: context.now()))
                    var rng = SplitMix64(seed: scenario.seed ^ 0xDE9A)
                    let leaving = devices.filter { _ in rng.nextUnit() < departure.share }
                    await withDiscardingTaskGroup { inner in
                        for device in leaving { inner.addTask { await device.depart(context) } }
                    }
                }
            }
        }
    }

    /// Listens for late pushes after the last send until `deadline`, or until every event has
    /// been applied, no push is being handled, none has arrived for the quiet period, and
    /// every expected pair is settled: a misdelivery or duplicate arriving after the last
    /// expected push is still seen.
    private func drain(_ recorder: Recorder, context: RunContext, stop: StopControl, until deadline: Int64) async {
        let quiet = scenario.quietPeriod.nanoseconds
        var nextCheck: Int64 = 0
        while MonotonicClock.nanoseconds() < deadline && stop.level < .aborting {
            try? await Task.sleep(for: .milliseconds(20))
            let now = MonotonicClock.nanoseconds()
            guard context.pushesInHand.load(ordering: .relaxed) == 0,
                now - context.lastPushArrival.load(ordering: .relaxed) >= quiet, now >= nextCheck
            else { continue }
            let emitted = context.emitted.load(ordering: .relaxed)
            let (applied, lost) = recorder.state.withLock { state in
                (state.applied, state.applied == emitted ? state.ledger.verdict(deadline: scenario.deadline, incidentLimit: 0).total.lost : -1)
            }
            // A verdict of a large run takes a while: check again no sooner than 4 times that.
            nextCheck = now + max(100_000_000, 4 * (MonotonicClock.nanoseconds() - now))
            if applied == emitted && lost == 0 { return }
        }
    }

    /// Each device renews its registration every `every` from its arrival: devices are walked
    /// in the order of their arrival modulo the interval, one round per interval, so one task
    /// drives them all.
    static func renewPeriodically(_ devices: [VirtualDevice], every: Duration, _ context: RunContext) async {
        let interval = every.nanoseconds
        guard interval > 0, !devices.isEmpty else { return }
        let byPhase = devices.sorted { $0.plan.arrival % interval < $1.plan.arrival % interval }
        await withDiscardingTaskGroup { group in
            var round: Int64 = 0
            while !context.isStopping {
                for device in byPhase {
                    let due = context.start + round * interval + device.plan.arrival % interval
                    // Its first renewal comes a whole interval after its arrival.
                    guard due > context.start + device.plan.arrival else { continue }
                    if due > context.now() + 1_000_000 {
                        guard await context.sleep(until: due) else { return }
                    }
                    group.addTask { await device.renewRegistration(context) }
                }
                // A fleet too large to renew this often skips rounds rather than piling them up.
                round = max(round + 1, (context.now() - context.start) / interval)
            }
        }
    }

    /// 12 random hex digits.
    static func makeRunID() -> String {
        let value = UInt64.random(in: 0..<(1 << 48))
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 12 - hex.count) + hex
    }

    private func reportProgress(_ recorder: Recorder, context: RunContext, total: Int) async {
        guard let progress = options.progress else { return }
        var previousSends = 0
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            if Task.isCancelled { return }
            let live = recorder.live
            let elapsed = Double(MonotonicClock.nanoseconds() - context.start) / 1e9
            progress(
                String(
                    format: "[%6.1fs] devices %d/%d ready, %d failed | sends %d (%d/s), dropped %d, failed %d | received %d | errors %d | send p99 %.1fms",
                    elapsed, live.devicesReady, total, live.devicesFailed, live.sends, live.sends - previousSends, live.sendsDropped,
                    live.sendFailures, live.received, live.errors, Double(live.sendP99) / 1e6
                )
            )
            previousSends = live.sends
        }
    }

    static func describe(_ target: Scenario.Target) -> String {
        switch target {
        case .embedded: "embedded"
        case .external(let backend, .url(let pns)): "backend \(backend), push service \(pns)"
        case .external(let backend, .embedded(let listen)): "backend \(backend), embedded push service on \(listen)"
        }
    }

    static func iso(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}

/// Applies the scenario's fault steps to the push service's admin API at their times.
struct FaultScheduler: Sendable {
    let steps: [Scenario.FaultStep]

    func run(_ context: RunContext, trafficStart: Int64) async {
        for step in steps.sorted(by: { $0.at < $1.at }) {
            guard await context.sleep(until: trafficStart + step.at.nanoseconds) else { return }
            await apply(step, context)
        }
    }

    private func apply(_ step: Scenario.FaultStep, _ context: RunContext) async {
        let admin = BackendClient(baseURL: context.pushServiceURL, connections: 1)
        let authorization = context.pushAdminToken.map { "Bearer \($0)" }
        var labels: [String] = []
        if step.drop != nil || step.throttle != nil || step.latency != nil || step.unregisteredRatio != nil {
            var settings = FaultSettings(seed: context.scenario.seed)
            if case .success(let current) = await admin.exchange(.GET, "/admin/faults", authorization: authorization, timeout: .seconds(5)),
                let decoded = try? JSONDecoder().decode(FaultSettings.self, from: Data(current.body.readableBytesView))
            {
                settings = decoded
            }
            if let drop = step.drop { settings.drop = drop; labels.append("drop \(drop)") }
            if let throttle = step.throttle { settings.throttle = throttle; labels.append("throttle \(throttle)") }
            if let ratio = step.unregisteredRatio { settings.unregisteredRatio = ratio; labels.append("unregistered \(ratio)") }
            if let latency = step.latency {
                settings.latency = Self.distribution(latency)
                labels.append("latency \(Self.describe(latency))")
            }
            let body = try! JSONEncoder().encode(settings)
            let result = await admin.exchange(.PUT, "/admin/faults", authorization: authorization, body: body, timeout: .seconds(5))
            _ = context.record(result, metric: "pns.admin", operation: "faults")
        }
        if step.backendSendLatency != nil || step.backendFetchLatency != nil {
            if let faults = context.backendFaults {
                var settings = faults.settings
                if let latency = step.backendSendLatency {
                    settings.sendLatency = Self.distribution(latency)
                    labels.append("backend send latency \(Self.describe(latency))")
                }
                if let latency = step.backendFetchLatency {
                    settings.fetchLatency = Self.distribution(latency)
                    labels.append("backend fetch latency \(Self.describe(latency))")
                }
                faults.replace(with: settings)
            } else {
                labels.append("backend latency skipped: the backend is not embedded")
            }
        }
        if case .restart(let down) = step.backend {
            if let restart = context.restartBackend {
                context.emit(.marker("backend stops" + (down > .zero ? " for \(DurationText.format(down))" : ""), at: context.now()))
                do {
                    try await restart(down)
                    labels.append("backend restarted")
                } catch {
                    context.emit(.error("fault:backend_restart_failed", at: context.now()))
                    labels.append("backend restart failed: \(error)")
                }
            } else {
                labels.append("backend restart skipped: the backend is not embedded")
            }
        }
        if let ratio = step.disconnect {
            let body = try! JSONEncoder().encode(DisconnectRequest(ratio: ratio))
            let result = await admin.exchange(.POST, "/admin/disconnect", authorization: authorization, body: body, timeout: .seconds(5))
            _ = context.record(result, metric: "pns.admin", operation: "disconnect")
            labels.append("disconnect \(ratio)")
        }
        await admin.shutdown()
        context.emit(.marker("faults: " + labels.joined(separator: ", "), at: context.now()))
    }

    static func describe(_ spec: Scenario.LatencySpec) -> String {
        switch spec {
        case .none: "none"
        case .fixed(let d): DurationText.format(d)
        case .uniform(let low, let high): "\(DurationText.format(low))–\(DurationText.format(high))"
        case .normal(let mean, let sd): "\(DurationText.format(mean))±\(DurationText.format(sd))"
        }
    }

    static func distribution(_ spec: Scenario.LatencySpec) -> LatencyDistribution? {
        func ms(_ d: Duration) -> Double { d.seconds * 1000 }
        switch spec {
        case .none: return nil
        case .fixed(let d): return .fixed(ms: ms(d))
        case .uniform(let low, let high): return .uniform(minMs: ms(low), maxMs: ms(high))
        case .normal(let mean, let sd): return .normal(meanMs: ms(mean), stddevMs: ms(sd))
        }
    }
}
