import Foundation
public import Logging
public import PushFleetCore
import PushFleetMetrics
public import PushFleetEngine
public import PushFleetResults

/// Plays one shard of a run (``Shard``): its devices and its share of every sender's sends,
/// against the system every shard reaches, meeting the other shards at the barriers in the
/// run's folder so that the run and its traffic start together. Writes the shard's folder:
/// `shard.json` (``ShardManifest``), the event tape and `summary.txt`. The verdict is the
/// merge's (``ShardMerge``).
public struct ShardRunner: Sendable {
    /// The shard could not play; its folder's `shard.json` says why, and the other shards were
    /// told at the barriers.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public var scenario: Scenario
    public var provenance: RunProvenance
    public var overrides: ShardManifest.Overrides
    public var shard: Shard
    /// The run's folder, shared by every shard; this shard writes `root/shard-I-of-K`, which
    /// must exist and be empty.
    public var root: String
    /// The whole run's plan (its run id is every shard's).
    public var plan: FleetPlan
    public var barrierTimeout: Duration
    /// Wall-clock nanoseconds before which the shard does not start.
    public var startAt: Int64?
    public var logger: Logger
    public var progress: (@Sendable (String) -> Void)?

    public init(
        scenario: Scenario, plan: FleetPlan, provenance: RunProvenance, overrides: ShardManifest.Overrides, shard: Shard, root: String,
        barrierTimeout: Duration, logger: Logger
    ) {
        self.scenario = scenario
        self.provenance = provenance
        self.overrides = overrides
        self.shard = shard
        self.root = root
        self.plan = plan
        self.barrierTimeout = barrierTimeout
        self.logger = logger
    }

    public var folder: String { (root as NSString).appendingPathComponent(shard.folderName) }

    public var runID: String { plan.runID }

    /// Why shards cannot play against the scenario's target, if they cannot: they must share
    /// one system under test, which an embedded target would start once in each of them.
    public static func targetProblem(_ scenario: Scenario) -> String? {
        switch scenario.target {
        case .embedded:
            "shards share one system under test: give the scenario a target with backend and pns URLs, or --backend and --push-service (pushfleet shards FILE --local K starts one)"
        case .external(_, .embedded):
            "shards share one push service: target.pns must be a URL, not embedded (each shard would start its own)"
        case .external(_, .url):
            nil
        }
    }

    /// Plays the shard and writes its folder; returns its manifest and its own (partial) result.
    public func run(stop: StopControl = StopControl()) async throws(Failure) -> (ShardManifest, RunResult) {
        let plan = plan
        var manifest = ShardManifest(
            runID: runID, shard: shard, status: .failed, scenarioFile: provenance.scenarioFile, scenarioText: provenance.scenarioText,
            overrides: overrides, devices: plan.devices.indices.filter { shard.owns(device: $0) }.count
        )
        let barrier = ShardBarrierFolder(folder: (root as NSString).appendingPathComponent(".barrier-\(runID)"), shard: shard)
        // For a follower of the run while it plays; a shard that cannot write it still plays.
        if let playing = try? JSONEncoder().encode(ShardPlaying(manifest)) {
            try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try? playing.write(to: URL(fileURLWithPath: (folder as NSString).appendingPathComponent(ShardPlaying.fileName)))
        }
        // Whatever ends the shard, its folder says how, and the others stop waiting for it.
        func fail(_ reason: String) -> Failure {
            manifest.reason = reason
            try? barrier.mark("start", .failed(reason))
            try? barrier.mark("traffic", .failed(reason))
            try? write(manifest, summary: nil)
            return Failure(description: "shard \(shard): \(reason)")
        }
        let tape: EventTapeWriter
        do {
            tape = try EventTapeWriter(
                path: (folder as NSString).appendingPathComponent(EventTape.fileName), runID: runID, shard: shard,
                tokens: plan.devices.map { shard.owns(device: $0.index) ? $0.token : "" }
            )
        } catch { throw fail("cannot write the event tape: \(error.localizedDescription)") }
        // Until --start-at, and at the barrier, a stop request ends the wait.
        while let startAt, WallClock.nanoseconds() < startAt, stop.level == .running {
            try? await Task.sleep(for: .nanoseconds(min(100_000_000, startAt - WallClock.nanoseconds())))
        }
        let decision = await barrier.meet("start", timeout: barrierTimeout) { stop.level != .running }
        guard case .start(let startWall) = decision else {
            _ = tape.finish()
            throw fail(ShardBarrierFolder.describe(decision, phase: "start") ?? "the start barrier did not open")
        }
        let lead = startWall - WallClock.nanoseconds()
        if lead > 0 { try? await Task.sleep(for: .nanoseconds(lead)) }

        var options = FleetRunner.Options(provenance: provenance, logger: logger, progress: progress)
        options.shard = shard
        options.tape = tape
        options.trafficGate = { [barrierTimeout] in
            // The run ends the wait on a stop request (it cancels the gate).
            let decision = await barrier.meet("traffic", timeout: barrierTimeout)
            if case .start(let wall) = decision { return .startAt(wall: wall) }
            return .stop(ShardBarrierFolder.describe(decision, phase: "traffic") ?? "the traffic barrier did not open")
        }
        let result: RunResult
        do {
            result = try await FleetRunner(scenario: scenario, plan: plan, options: options).run(stop: stop)
        } catch {
            _ = tape.finish()
            throw fail("the run could not start: \(error)")
        }
        let written = tape.finish()
        manifest.status = result.info.aborted ? .interrupted : .completed
        manifest.reason = result.info.abortReason
        manifest.tape = .init(file: EventTape.fileName, events: written.events, bytes: written.bytes, failure: written.failure)
        manifest.info = result.info
        manifest.generator = result.generator
        manifest.peakResidentBytes = ProcessMemory.peakResident()
        do { try write(manifest, summary: Self.summary(manifest, result)) } catch {
            throw Failure(description: "shard \(shard): cannot write its results in \(folder): \(error.localizedDescription)")
        }
        return (manifest, result)
    }

    private func write(_ manifest: ShardManifest, summary: String?) throws {
        try manifest.encoded().write(to: URL(fileURLWithPath: (folder as NSString).appendingPathComponent(ShardManifest.fileName)))
        if let summary { try Data(summary.utf8).write(to: URL(fileURLWithPath: (folder as NSString).appendingPathComponent("summary.txt"))) }
    }

    /// What a shard saw of itself; the ledger's verdict is the merge's.
    public static func summary(_ manifest: ShardManifest, _ result: RunResult) -> String {
        func count(_ name: String) -> String { Int(result.counters[name] ?? 0).grouped }
        var lines = [
            "pushfleet shard \(manifest.index)/\(manifest.count) of run \(manifest.runID): \(manifest.status.rawValue)"
                + (manifest.reason.map { " (\($0))" } ?? ""),
            "devices played \(manifest.devices.grouped), ready \(result.devices.ready.grouped)",
            "sends \(count("sends")), dropped \(count("sends.dropped")); pushes received by this shard's devices \(result.timeseries.reduce(0) { $0 + $1.received }.grouped)",
            "event tape \((manifest.tape?.events ?? 0).grouped) events, \((manifest.tape?.bytes ?? 0).grouped) bytes"
                + (manifest.tape?.failure.map { " — \($0)" } ?? ""),
            String(
                format: "traffic %.1f–%.1f s; peak RSS %.1f MiB", result.info.trafficStartSecond, result.info.trafficEndSecond,
                Double(manifest.peakResidentBytes ?? 0) / 1_048_576
            ),
        ]
        if let generator = result.generator, generator.bound { lines.append("generator was the limit: " + generator.limits.joined(separator: "; ")) }
        lines.append("judged only as part of the whole run: pushfleet merge <the run's folder>")
        return lines.joined(separator: "\n") + "\n"
    }
}
