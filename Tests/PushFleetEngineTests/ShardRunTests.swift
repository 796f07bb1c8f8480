import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetLedger
@testable import PushFleetMetrics
import PushFleetReport
import PushFleetResults
import PushFleetScenario
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import ServiceLifecycle
import Synchronization
import Testing

/// The same scenario and seed played as one process and as shards (each a ``ShardRunner``, as
/// `pushfleet run --shard` is, meeting at barriers in one folder), against one system: the
/// merge judges the whole exactly as the single run does, cross-shard pairs included.
@Suite("Sharded runs", .serialized)
struct ShardRunTests {
    static func scenario(backend: String, pns: String, seed: UInt64) -> String {
        """
        name: sharded
        seed: \(seed)
        target: { backend: "\(backend)", pns: "\(pns)" }
        fleet:
          users: 9
          devices_per_user: { min: 1, max: 3 }
          platforms: { apns: 2, fcm: 1, wns: 1 }
        lifecycle: [login, register, connect, receive, fetch_secure]
        # Nor is setup's speed: a device timed out on a loaded machine in one run and not the
        # other would make the two disagree for a reason sharding has nothing to do with.
        timeouts: { login: 60s, register: 60s, connect: 60s, send: 60s, fetch: 60s }
        traffic:
          - { name: plain, kind: plain, rate: 12/s, duration: 2s }
          - { name: secure, kind: secure, rate: 8/s, duration: 2s }
        # Lateness is not under test: a loaded test machine must not turn pushes late. A shard
        # listens to the end of deadline and grace, so this is also each sharded run's tail.
        deadline: 6s
        grace: 1s
        quiet_period: 1s
        thresholds:
          sends.late_start_ratio: []
        """
    }

    static let logger: Logger = {
        var logger = Logger(label: "shards")
        logger.logLevel = .critical
        return logger
    }()

    /// Plays `count` shards of `yaml` at once in this process and merges their folders.
    static func shards(_ yaml: String, count: Int, root: URL, drop: Int? = nil) async throws -> (RunResult, [ShardMerge.ShardLine]) {
        let scenario = try ScenarioLoader.parse(yaml, file: "sharded.yaml")
        let runID = FleetRunner.makeRunID()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count where index != drop {
                group.addTask {
                    let shard = try Shard(index: index, count: count)
                    try FileManager.default.createDirectory(at: root.appendingPathComponent(shard.folderName), withIntermediateDirectories: true)
                    let runner = ShardRunner(
                        scenario: scenario, plan: FleetPlan(scenario: scenario, runID: runID),
                        provenance: RunProvenance(scenarioFile: "sharded.yaml", scenarioText: yaml, version: "test", host: .current()),
                        overrides: .init(), shard: shard, root: root.path, barrierTimeout: .seconds(drop == nil ? 60 : 2), logger: logger
                    )
                    _ = try? await runner.run()
                }
            }
            try await group.waitForAll()
        }
        let loaded = try ShardMerge.load(try ShardMerge.folders([root.path]))
        return try ShardMerge.merge(loaded, scenario: scenario, version: "test")
    }

    /// A hostile (or correct) backend in front of a fresh push service; `body` gets its URL.
    static func withBackend<T: Sendable>(
        _ behaviour: HostileBackend.Behaviour, seed: UInt64, _ body: @escaping @Sendable (String, TestSystem, HostileBackend) async throws -> T
    ) async throws -> T {
        try await RunGate.exclusive {
            try await TestSystem.run { system in
                let backend = HostileBackend(behaviour: behaviour, pushService: system.pushService, seed: seed)
                let group = ServiceGroup(configuration: .init(services: [.init(service: backend.makeService(logger: logger))], logger: logger))
                let server = Task { try await group.run() }
                defer { server.cancel() }
                let url = try await backend.bound.value().httpURL
                let value = try await body(url, system, backend)
                await group.triggerGracefulShutdown()
                await backend.shutdown()
                return value
            }
        }
    }

    /// A tape's header as the writer writes it.
    static func headerBytes(_ header: EventTape.Header) -> [UInt8] {
        var encoder = EventTapeEncoder(origin: header.originMonotonic, tokens: [])
        var head = EventTape.magic + [EventTape.version]
        encoder.writeHeader(header, into: &head)
        return head
    }

    static func temporary() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pushfleet-shards-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("one process and 3 shards against one system: the same ledger counts, the same operation counts, and the merge passes; one generator-bound shard makes it inconclusive")
    func agreesWithSingleRun() async throws {
        let seed: UInt64 = 31
        let (single, (sharded, lines), bound) = try await Self.withBackend(.correct, seed: seed) { url, system, backend in
            let yaml = Self.scenario(backend: url, pns: system.pushService, seed: seed)
            backend.nextRun()
            let single = try await FleetRunner(
                scenario: try ScenarioLoader.parse(yaml, file: "sharded.yaml"),
                options: .init(scenarioFile: "sharded.yaml", scenarioText: yaml, version: "test", logger: Self.logger)
            ).run()
            backend.nextRun()
            let root = try Self.temporary()
            defer { try? FileManager.default.removeItem(at: root) }
            let merged = try await Self.shards(yaml, count: 3, root: root)
            // Shard 1 says its generator was the limit: the whole is inconclusive, whatever the others did.
            let path = root.appendingPathComponent("shard-1-of-3/shard.json")
            var manifest = try JSONDecoder().decode(ShardManifest.self, from: Data(contentsOf: path))
            manifest.generator?.limits = ["12 of 16 sends woke more than 10 ms late"]
            try manifest.encoded().write(to: path)
            let (bound, _) = try ShardMerge.merge(
                try ShardMerge.load(try ShardMerge.folders([root.path])), scenario: try ScenarioLoader.parse(yaml, file: "sharded.yaml"), version: "test"
            )
            // Shard 2's tape claims to have started two days after the others: left out, named.
            let tape = root.appendingPathComponent("shard-2-of-3/events.pftape")
            let bytes = Array(try Data(contentsOf: tape))
            let header = try EventTapeReader.header(of: bytes)
            var late = header
            late.originWall += 2 * 86_400 * 1_000_000_000
            try Data(Self.headerBytes(late) + bytes.dropFirst(Self.headerBytes(header).count)).write(to: tape)
            let (skewed, _) = try ShardMerge.merge(
                try ShardMerge.load(try ShardMerge.folders([root.path])), scenario: try ScenarioLoader.parse(yaml, file: "sharded.yaml"), version: "test"
            )
            #expect(skewed.info.aborted && skewed.info.abortReason?.contains("shard 2/3 its tape's clock is 17") == true, "\(skewed.info.abortReason ?? "")")
            #expect(skewed.delivery.misdelivered == 0, "\(skewed.delivery)")
            return (single, merged, bound)
        }
        #expect(bound.inconclusive && !bound.passed, "\(bound.generator?.limits ?? [])")
        #expect(bound.generator?.limits.contains("shard 1/3: 12 of 16 sends woke more than 10 ms late") == true, "\(bound.generator?.limits ?? [])")
        #expect(lines.count == 3 && lines.allSatisfy { $0.problem == nil && $0.events > 0 }, "\(lines)")
        let comparison = ShardComparison(single: single, sharded: sharded, shards: 3)
        #expect(comparison.agree, "\(comparison.table)")
        #expect(sharded.delivery.expected > 0 && sharded.delivery.delivered == sharded.delivery.expected, "\(sharded.delivery)")
        #expect(sharded.passed && !sharded.info.aborted, "\(sharded.thresholds.filter { !$0.passed }) \(sharded.info.abortReason ?? "")")
        // Every device played by exactly one shard, every send made by one.
        #expect(sharded.devices.ready == single.devices.ready && sharded.devices.planned == single.devices.planned)
        // The push service was watched by every shard, and its reports explain the whole.
        #expect(sharded.hops?.view == "watched", "\(sharded.hops?.note ?? "")")
        // The time series covers the traffic once, not once per shard.
        let sends = sharded.timeseries.reduce(0) { $0 + $1.sends }
        #expect(sends == Int(single.counters["sends"] ?? 0))
    }

    @Test("a backend that pushes some sends to another user: each misdelivery is counted once, across shards as within one")
    func crossShardMisdelivery() async throws {
        let seed: UInt64 = 32
        let (sharded, tally) = try await Self.withBackend(.misdeliverTwice, seed: seed) { url, system, backend in
            let yaml = Self.scenario(backend: url, pns: system.pushService, seed: seed)
            backend.nextRun()
            let root = try Self.temporary()
            defer { try? FileManager.default.removeItem(at: root) }
            let (result, _) = try await Self.shards(yaml, count: 3, root: root)
            return (result, backend.tally)
        }
        #expect(tally.misdelivered > 0)
        #expect(sharded.delivery.misdelivered == tally.misdelivered, "\(sharded.delivery) vs \(tally)")
        #expect(!sharded.passed)
        // A send is made by shard (id − 1) mod 3; a misdelivered receipt's device by its index mod 3.
        let incidents = (sharded.incidents ?? []).filter { $0.outcome == "misdelivered" }
        let across = incidents.filter { incident in
            guard let send = incident.send, let device = incident.device else { return false }
            return (send - 1) % 3 != device % 3
        }
        #expect(!across.isEmpty, "\(incidents.map { "\($0.send ?? -1)→\($0.device ?? -1)" })")
    }

    @Test("the push service drops 30% of pushes: the merge puts every lost pair at the push service's drop, whichever shard watched it")
    func lostPairsExplainedAcrossShards() async throws {
        let seed: UInt64 = 36
        let sharded = try await Self.withBackend(.correct, seed: seed) { url, system, backend in
            try await system.setFaults(FaultSettings(drop: 0.3, seed: 7))
            let yaml = Self.scenario(backend: url, pns: system.pushService, seed: seed)
            backend.nextRun()
            let root = try Self.temporary()
            defer { try? FileManager.default.removeItem(at: root) }
            return try await Self.shards(yaml, count: 3, root: root).0
        }
        let c = sharded.delivery
        #expect(c.lost > 0 && c.delivered > 0, "\(c)")
        #expect(sharded.hops?.view == "watched", "\(sharded.hops?.note ?? "")")
        let dropped = (sharded.hops?.why ?? []).filter { $0.outcome == "lost" && $0.hop == "push_service" && $0.cause == "dropped" }
        #expect(dropped.reduce(0) { $0 + $1.count } == c.lost, "\(sharded.hops?.why ?? [])")
    }

    @Test("a shard told to stop while it waits at the barrier stops, says so, and marks itself failed for the others")
    func stopAtBarrier() async throws {
        let root = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: root) }
        let yaml = Self.scenario(backend: "http://127.0.0.1:9", pns: "http://127.0.0.1:9", seed: 34)
        let shard = try Shard(index: 0, count: 2)
        try FileManager.default.createDirectory(at: root.appendingPathComponent(shard.folderName), withIntermediateDirectories: true)
        let scenario = try ScenarioLoader.parse(yaml, file: "sharded.yaml")
        let runner = ShardRunner(
            scenario: scenario, plan: FleetPlan(scenario: scenario, runID: "abc123"),
            provenance: RunProvenance(scenarioFile: "sharded.yaml", scenarioText: yaml, version: "test", host: .current()),
            overrides: .init(), shard: shard, root: root.path, barrierTimeout: .seconds(600), logger: Self.logger
        )
        let stop = StopControl()
        let barrier = ShardBarrierFolder(folder: root.appendingPathComponent(".barrier-abc123").path, shard: shard)
        let run = Task { try await runner.run(stop: stop) }
        // Once it waits at the start barrier (shard 1 never comes), it is told to stop.
        while barrier.marks("start")[0] == nil { try await Task.sleep(for: .milliseconds(20)) }
        _ = stop.escalate(reason: "received SIGTERM")
        await #expect(throws: ShardRunner.Failure.self) { try await run.value }
        let manifest = try JSONDecoder().decode(ShardManifest.self, from: Data(contentsOf: root.appendingPathComponent("shard-0-of-2/shard.json")))
        #expect(manifest.status == .failed && manifest.reason?.contains("stopped while waiting") == true, "\(manifest.reason ?? "")")
        #expect(barrier.marks("start")[0] == .failed(manifest.reason ?? ""), "\(barrier.marks("start"))")
    }

    @Test("a run stopped while its traffic gate waits stops waiting, sends nothing, and is marked aborted")
    func stopAtTrafficGate() async throws {
        let cancelled = Mutex(false)
        let result = try await RunGate.exclusive {
            try await TestSystem.run { system in
                let yaml = Self.scenario(backend: system.backend, pns: system.pushService, seed: 35)
                let stop = StopControl()
                var options = FleetRunner.Options(scenarioFile: "sharded.yaml", scenarioText: yaml, version: "test", logger: Self.logger)
                options.trafficGate = {
                    _ = stop.escalate(reason: "received SIGTERM")
                    do { try await Task.sleep(for: .seconds(60)) } catch { cancelled.withLock { $0 = true } }
                    return .stop("the gate was not cancelled")
                }
                return try await FleetRunner(scenario: try ScenarioLoader.parse(yaml, file: "sharded.yaml"), options: options).run(stop: stop)
            }
        }
        #expect(cancelled.withLock { $0 })
        #expect(result.info.aborted && result.info.abortReason == "received SIGTERM", "\(result.info.abortReason ?? "")")
        #expect(result.counters["sends"] == 0)
    }

    @Test("a shard that never came is named, the others stop at the barrier, and the merge never passes")
    func missingShard() async throws {
        let seed: UInt64 = 33
        let (sharded, lines) = try await Self.withBackend(.correct, seed: seed) { url, system, backend in
            let yaml = Self.scenario(backend: url, pns: system.pushService, seed: seed)
            backend.nextRun()
            let root = try Self.temporary()
            defer { try? FileManager.default.removeItem(at: root) }
            return try await Self.shards(yaml, count: 3, root: root, drop: 1)
        }
        #expect(sharded.info.aborted)
        let reason = sharded.info.abortReason ?? ""
        #expect(reason.contains("shard 1/3 missing"), "\(reason)")
        #expect(reason.contains("never reached the start barrier"), "\(reason)")
        #expect(lines.count == 2 && lines.allSatisfy { $0.status == "failed" }, "\(lines)")
    }
}
