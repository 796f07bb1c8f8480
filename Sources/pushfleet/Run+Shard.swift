import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetMetrics
import PushFleetResults
import PushFleetScenario

/// The flags that make a run one shard of several, and the target given beside the file.
struct ShardFlags: ParsableArguments {
    @Option(help: "Play shard INDEX/COUNT (0/4 … 3/4): its devices and its share of every sender's sends; write them to --out/shard-INDEX-of-COUNT.")
    var shard: String?
    @Option(help: "The number of shards, with --shard-index-from-env.") var shards: Int?
    @Option(help: "The environment variable that holds this shard's index (Kubernetes' Indexed Job sets JOB_COMPLETION_INDEX).")
    var shardIndexFromEnv: String?
    @Option(help: "The run id every shard shares (1–32 hex digits); default: derived from the scenario, seed, shard count and --out.")
    var runId: String?
    @Option(help: "Shards start no earlier than this: ISO 8601 with a zone (2026-11-26T10:00:00Z) or Unix seconds.") var startAt: String?
    @Option(help: "How long a shard waits for the others at each barrier (before its run, before its traffic).")
    var barrierTimeout = "10m"
    @Option(help: "Play against this backend (with --push-service) instead of the scenario's target.") var backend: String?
    @Option(help: "The push service that goes with --backend.") var pushService: String?

    /// Checks the flags together; the environment is read here, once.
    func resolve() throws -> Shard? {
        if (backend == nil) != (pushService == nil) { throw ValidationError("--backend and --push-service go together") }
        if let backend, let pushService, let problem = ScenarioOverrides.problem(withTarget: backend, pushService) {
            throw ValidationError(problem)
        }
        if let runId, !(1...32).contains(runId.count) || !runId.allSatisfy(\.isHexDigit) {
            throw ValidationError("--run-id \(runId): give 1–32 hex digits")
        }
        let parsed: Shard?
        switch (shard, shardIndexFromEnv) {
        case (.some, .some):
            throw ValidationError("give --shard INDEX/COUNT or --shard-index-from-env VAR with --shards COUNT, not both")
        case (.some(let text), nil):
            do { parsed = try Shard(parsing: text) } catch { throw ValidationError("--shard: \(error)") }
            if let shards, shards != parsed?.count { throw ValidationError("--shards \(shards) differs from --shard \(text)") }
        case (nil, .some(let name)):
            guard let shards else { throw ValidationError("--shard-index-from-env needs --shards COUNT") }
            guard let value = ProcessInfo.processInfo.environment[name] else {
                throw ValidationError("--shard-index-from-env \(name): the environment has no \(name)")
            }
            guard let index = Int(value.trimmingCharacters(in: .whitespaces)) else {
                throw ValidationError("--shard-index-from-env \(name): '\(value.prefix(40))' is not a shard index")
            }
            do { parsed = try Shard(index: index, count: shards) } catch { throw ValidationError("--shard-index-from-env \(name): \(error)") }
        case (nil, nil):
            if shards != nil { throw ValidationError("--shards needs --shard-index-from-env VAR") }
            parsed = nil
        }
        if parsed == nil, startAt != nil { throw ValidationError("--start-at is for shards (--shard or --shard-index-from-env)") }
        _ = try startInstant()
        _ = try barrierWait()
        return parsed
    }

    /// `--start-at` in wall-clock nanoseconds; within a day of now either way.
    func startInstant() throws -> Int64? {
        guard let startAt else { return nil }
        var seconds: Double?
        if let unix = Double(startAt), unix.isFinite {
            seconds = unix
        } else {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let date = formatter.date(from: startAt) ?? ISO8601DateFormatter().date(from: startAt)
            seconds = date?.timeIntervalSince1970
        }
        guard let seconds else { throw ValidationError("--start-at \(startAt): give ISO 8601 with a zone (2026-11-26T10:00:00Z) or Unix seconds") }
        let now = Double(WallClock.nanoseconds()) / 1e9
        guard abs(seconds - now) <= 86_400 else { throw ValidationError("--start-at \(startAt): more than a day from now") }
        return Int64(seconds * 1e9)
    }

    func barrierWait() throws -> Duration {
        let wait: Duration
        do { wait = try DurationText.parse(barrierTimeout) } catch { throw ValidationError("--barrier-timeout: \(error)") }
        guard wait >= .seconds(1), wait <= .seconds(86_400) else { throw ValidationError("--barrier-timeout \(barrierTimeout): give 1s to 24h") }
        return wait
    }

    var overrides: ShardManifest.Overrides {
        ShardManifest.Overrides(backend: backend, pushService: pushService)
    }
}

extension Run {
    /// Plays one shard: its devices and its share of the sends, against a system every shard
    /// reaches, meeting the others at the barriers in `--out`; writes `shard.json`, the event
    /// tape and a summary to `--out/shard-I-of-K`. The verdict is the merge's (`pushfleet merge`):
    /// a shard exits 0 when it played its part, 1 when it was stopped or failed.
    func runShard(_ shard: Shard, source: ScenarioSource) async throws {
        let scenario = source.scenario
        guard let root = out else {
            FileHandleOutput.standardError("a shard needs --out: the folder every shard of the run writes into (and meets the others in)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        if !shard.isWhole, case .embedded = scenario.target {
            FileHandleOutput.standardError(
                "shards share one system under test: give the scenario a target with backend and pns URLs, or --backend and --push-service (pushfleet shards FILE --local K starts one)"
            )
            throw ExitCode(ExitStatus.invalidInput)
        }
        if !shard.isWhole, case .external(_, .embedded) = scenario.target {
            FileHandleOutput.standardError("shards share one push service: target.pns must be a URL, not embedded (each shard would start its own)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        let absoluteRoot = URL(fileURLWithPath: root).standardizedFileURL.path
        let folder = (root as NSString).appendingPathComponent(shard.folderName)
        try ReportWriter.prepareOrRefuse(folder)
        let runID = shardFlags.runId?.lowercased()
            ?? ShardManifest.derivedRunID(scenarioText: source.text, seed: scenario.seed, count: shard.count, folder: absoluteRoot)
        let plan = FleetPlan(scenario: scenario, runID: runID)
        let played = plan.devices.indices.filter { shard.owns(device: $0) }.count
        if let problem = FileLimit.problem(scenario, devices: played) {
            FileHandleOutput.standardError("\(self.scenario): \(problem)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        var overrides = shardFlags.overrides
        overrides.seed = seed
        overrides.hub = hub ? true : nil
        var manifest = ShardManifest(
            runID: runID, shard: shard, status: .failed, scenarioFile: source.path, scenarioText: source.text, overrides: overrides,
            devices: played
        )
        let barrier = ShardBarrierFolder(folder: (root as NSString).appendingPathComponent(".barrier-\(runID)"), shard: shard)
        let wait = try shardFlags.barrierWait()
        // Whatever ends the shard, its folder says how, and the others stop waiting for it.
        func fail(_ reason: String) throws -> Never {
            manifest.reason = reason
            try? barrier.mark("start", .failed(reason))
            try? barrier.mark("traffic", .failed(reason))
            try? manifest.encoded().write(to: URL(fileURLWithPath: (folder as NSString).appendingPathComponent(ShardManifest.fileName)))
            FileHandleOutput.standardError("shard \(shard): \(reason)")
            throw ExitCode(ExitStatus.failure)
        }
        let tape: EventTapeWriter
        do {
            tape = try EventTapeWriter(
                path: (folder as NSString).appendingPathComponent(EventTape.fileName), runID: runID, shard: shard, tokens: plan.devices.map(\.token)
            )
        } catch { try fail("cannot write the event tape: \(error.localizedDescription)") }

        if let start = try shardFlags.startInstant() {
            let remaining = start - WallClock.nanoseconds()
            if remaining > 0 { try await Task.sleep(for: .nanoseconds(remaining)) }
        }
        let decision = await barrier.meet("start", timeout: wait)
        guard case .startAt(let startWall) = decision.gate else {
            try fail(ShardBarrierFolder.describe(decision, phase: "start") ?? "the start barrier did not open")
        }
        let lead = startWall - WallClock.nanoseconds()
        if lead > 0 { try await Task.sleep(for: .nanoseconds(lead)) }

        let stop = StopControl()
        let signals = SignalWatcher { signal in
            _ = stop.escalate(reason: "received \(signal)")
            FileHandleOutput.standardError("\n\(signal): shard \(shard) stopping, writing what it recorded")
        }
        defer { signals.cancel() }
        let progress = ProgressLine(enabled: !quiet)
        var logger = Logger(label: "pushfleet.shard")
        logger.logLevel = .warning
        var options = FleetRunner.Options(provenance: source.provenance, logger: logger) { line in progress.show("shard \(shard) " + line) }
        options.shard = shard
        options.tape = tape
        options.trafficGate = {
            let decision = await barrier.meet("traffic", timeout: wait)
            return decision.gate ?? .stop(ShardBarrierFolder.describe(decision, phase: "traffic") ?? "the traffic barrier did not open")
        }
        let result: RunResult
        do {
            result = try await FleetRunner(scenario: scenario, plan: plan, options: options).run(stop: stop)
        } catch {
            _ = tape.finish()
            try fail("the run could not start: \(error)")
        }
        progress.finish()
        let written = tape.finish()
        manifest.status = result.info.aborted ? .interrupted : .completed
        manifest.reason = result.info.abortReason
        manifest.tape = .init(file: EventTape.fileName, events: written.events, bytes: written.bytes, failure: written.failure)
        manifest.info = result.info
        manifest.generator = result.generator
        manifest.peakResidentBytes = ShardManifest.ownPeakResidentBytes()
        let summary = Self.shardSummary(manifest, result)
        do {
            try manifest.encoded().write(to: URL(fileURLWithPath: (folder as NSString).appendingPathComponent(ShardManifest.fileName)))
            try Data(summary.utf8).write(to: URL(fileURLWithPath: (folder as NSString).appendingPathComponent("summary.txt")))
        } catch {
            FileHandleOutput.standardError("shard \(shard): cannot write its results in \(folder): \(error.localizedDescription)")
            throw ExitCode(ExitStatus.failure)
        }
        FileHandleOutput.standardOutput(summary + "shard results: \(folder)")
        if manifest.status != .completed || written.failure != nil { throw ExitCode(ExitStatus.failure) }
    }

    /// What a shard saw of itself; the ledger's verdict is the merge's.
    static func shardSummary(_ manifest: ShardManifest, _ result: RunResult) -> String {
        let counters = result.counters
        func count(_ name: String) -> String { Int(counters[name] ?? 0).grouped }
        var lines = [
            "pushfleet shard \(manifest.index)/\(manifest.count) of run \(manifest.runID): \(manifest.status.rawValue)"
                + (manifest.reason.map { " (\($0))" } ?? ""),
            "devices played \(manifest.devices.grouped), ready \(result.devices.ready.grouped)",
            "sends \(count("sends")), dropped \(count("sends.dropped")); pushes received by this shard's devices \(result.timeseries.reduce(0) { $0 + $1.received }.grouped)",
            "event tape \(manifest.tape?.events.grouped ?? "0") events, \(manifest.tape?.bytes.grouped ?? "0") bytes"
                + (manifest.tape?.failure.map { " — \($0)" } ?? ""),
            String(format: "traffic %.1f–%.1f s; peak RSS %.1f MiB", result.info.trafficStartSecond, result.info.trafficEndSecond,
                   Double(manifest.peakResidentBytes ?? 0) / 1_048_576),
        ]
        if let generator = result.generator, generator.bound { lines.append("generator was the limit: " + generator.limits.joined(separator: "; ")) }
        lines.append("judged only as part of the whole run: pushfleet merge <the run's folder>")
        return lines.joined(separator: "\n") + "\n"
    }
}

extension ShardBarrier.Decision {
    /// The gate this decision opens, or nil when it does not.
    var gate: TrafficGate? {
        if case .start(let wall) = self { .startAt(wall: wall) } else { nil }
    }
}
