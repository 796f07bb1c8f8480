import Foundation
public import Logging
public import PushFleetCore
public import PushFleetMetrics
public import PushFleetResults

/// Plays a scenario against a system under test: ramps the fleet, runs the senders and faults,
/// drains, and returns everything measured. The run itself is ``FleetRun``, in named phases.
public struct FleetRunner: Sendable {
    public struct Options: Sendable {
        /// What the reports say the run came from; the caller gathers it.
        public var provenance: RunProvenance
        public var logger: Logger
        /// Receives a progress line about once a second.
        public var progress: (@Sendable (String) -> Void)?
        /// Receives a frame of the live page about once a second (`--live`); nil: none is made.
        public var live: (@Sendable (LiveFrame) -> Void)?
        /// The live page's sliding window, judged a deadline behind the present.
        public var liveWindow: Duration = .seconds(10)
        /// Called once the fleet is in and before traffic starts (benchmarks sample memory here).
        public var beforeTraffic: (@Sendable () async -> Void)?
        /// Called once the drain has ended, before the fleet departs and disconnects: benchmarks
        /// close their per-push window here, so a short run's teardown is not counted per push.
        public var afterDrain: (@Sendable () async -> Void)?
        /// Live Prometheus metrics to keep up to date, if any.
        public var metrics: LiveMetrics?
        /// The run id (hex digits) when the runner makes the plan; random when nil. A plan given
        /// to the runner carries its own.
        public var runID: String?
        /// Receives every request the fleet makes to the backend and its answer (`api check`).
        public var trace: (@Sendable (RequestTrace) -> Void)?
        /// The clock the run reads and waits on: the machine's, or a test's manual one.
        public var clock: any RunClock = SystemRunClock()
        /// A span of the traffic, from its start, that the result also judges on its own
        /// (``RunResult/window``): a capacity step's window after its warm-up.
        public var judgedWindow: Range<Duration>?
        /// After the drain, every device unregisters and disconnects, as a departure does: a
        /// capacity step against an external backend leaves no registrations for the next.
        public var departAtEnd = false
        /// The part of the plan this process plays (``Shard``): its devices and its share of
        /// every sender's schedule. Sharded runs share the run id; only shard 0 plays faults.
        public var shard = Shard.whole
        /// Where every event the recorder applies is also written (a shard's raw material).
        package var tape: EventTapeWriter?
        /// Devices setting up at once, at most; later arrivals wait their turn (``SetupTracker``).
        /// Nil: four per pooled connection (at least 256), or 4,096 when every device has its own.
        public var setupsInFlight: Int?
        /// Called once the fleet is in; says when (wall clock) the traffic starts, so the shards
        /// of a run start theirs together, or why the run cannot go on.
        public var trafficGate: (@Sendable () async -> TrafficGate)?
        /// Where the embedded reference backend and notification hub record their spans, for the
        /// run's trace export; nil when nothing is exported (they then record none).
        public var serverSpans: ServerSpans?

        public init(provenance: RunProvenance, logger: Logger, progress: (@Sendable (String) -> Void)? = nil) {
            self.provenance = provenance
            self.logger = logger
            self.progress = progress
        }
    }

    public let scenario: Scenario
    /// The fleet to play; made from the scenario (with ``Options/runID``) when nil.
    public let plan: FleetPlan?
    public let options: Options

    public init(scenario: Scenario, plan: FleetPlan? = nil, options: Options) {
        self.scenario = scenario
        self.plan = plan
        self.options = options
    }

    /// Plays the scenario against a running system until its end, or until `stop` says so.
    /// Starting what the scenario's target names is the launcher's work (`PushFleetLauncher`).
    public func run(against system: SystemUnderTest, stop: StopControl = StopControl()) async throws -> RunResult {
        guard scenario.api != nil else { throw MissingAPIError() }
        let plan = plan ?? FleetPlan(scenario: scenario, runID: options.runID ?? Self.makeRunID())
        guard scenario.network.hasFaults else {
            return await FleetRun(scenario: scenario, plan: plan, system: system, options: options, stop: stop).play(stop: stop)
        }
        let gateway = try NetworkFaultPlan.gateway(system.pushService)
        let network = NetworkFaultPlan(scenario: scenario, plan: plan, endpoints: try NetworkFaultPlan.endpoints(of: system, faults: scenario.network.faults))
        // The kernel's rules act on links the shards share, so one shard owns them; each process
        // proxies its own devices' links.
        let kernel = options.shard.index == 0 && scenario.network.needsKernel
        if kernel {
            if let reason = NFTables.unavailable() { throw NetworkFaultsUnavailable(description: reason) }
            await NFTables.sweepStale()
            try await NFTables.run(network.installScript)
        }
        let proxy: PhoneLinkProxy?
        do {
            proxy = try await scenario.network.needsProxy ? network.startProxy(gateway: gateway, seed: scenario.seed) : nil
        } catch {
            if kernel { try? await NFTables.run(network.removeScript) }
            throw error
        }
        let result = await FleetRun(scenario: scenario, plan: plan, system: system, options: options, stop: stop, network: network, phoneProxy: proxy)
            .play(stop: stop)
        // Healed before the result is written, whatever stopped the run; a process killed
        // before this leaves its table to the next run's sweep.
        if kernel { try? await NFTables.run(network.removeScript) }
        await proxy?.close()
        return result
    }

    package struct NetworkFaultsUnavailable: Error, CustomStringConvertible {
        package var description: String
    }

    /// The target as the reports name it.
    public static func describe(_ target: Scenario.Target) -> String {
        switch target {
        case .embedded: "embedded"
        case .external(let backend, .url(let pns)): "backend \(backend), push service \(pns)"
        case .external(let backend, .embedded(let listen)): "backend \(backend), embedded push service on \(listen)"
        }
    }

    /// ISO 8601 with milliseconds, from wall-clock nanoseconds.
    public static func iso(_ wallNanoseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(wallNanoseconds) / 1e9))
    }

    /// 12 random hex digits.
    public static func makeRunID() -> String {
        let value = UInt64.random(in: 0..<(1 << 48))
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 12 - hex.count) + hex
    }
}

/// What a run waiting to start its traffic is told (``FleetRunner/Options/trafficGate``).
public enum TrafficGate: Sendable, Equatable {
    /// Start at this wall-clock instant (nanoseconds since the Unix epoch); at once if past.
    case startAt(wall: Int64)
    /// Do not start: the run stops here and writes what it recorded, with this reason.
    case stop(String)
}

/// A scenario built in code without an api description (the loader always gives one).
public struct MissingAPIError: Error, CustomStringConvertible {
    public var description: String { "the scenario has no api description; load it with ScenarioLoader or set scenario.api" }
}
