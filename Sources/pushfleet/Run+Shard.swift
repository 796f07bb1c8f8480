import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
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
    /// Plays one shard (``ShardRunner``) and says how it went: 0 when it played its part, 1
    /// when it was stopped or failed. The verdict is the merge's (`pushfleet merge`).
    func runShard(_ shard: Shard, source: ScenarioSource) async throws {
        let scenario = source.scenario
        guard let root = out else {
            FileHandleOutput.standardError("a shard needs --out: the folder every shard of the run writes into (and meets the others in)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        if !shard.isWhole, let problem = ShardRunner.targetProblem(scenario) {
            FileHandleOutput.standardError(problem)
            throw ExitCode(ExitStatus.invalidInput)
        }
        let absoluteRoot = URL(fileURLWithPath: root).standardizedFileURL.path
        let runID = shardFlags.runId?.lowercased()
            ?? ShardManifest.derivedRunID(scenarioText: source.text, seed: scenario.seed, count: shard.count, folder: absoluteRoot)
        let plan = FleetPlan(scenario: scenario, runID: runID)
        let played = plan.devices.indices.filter { shard.owns(device: $0) }.count
        if let problem = FileLimit.problem(scenario, devices: played) {
            FileHandleOutput.standardError("\(self.scenario): \(problem)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        try ReportWriter.prepareOrRefuse((root as NSString).appendingPathComponent(shard.folderName))
        var overrides = shardFlags.overrides
        overrides.seed = seed
        overrides.hub = hub ? true : nil
        let stop = StopControl()
        let signals = SignalWatcher { signal in
            _ = stop.escalate(reason: "received \(signal)")
            FileHandleOutput.standardError("\n\(signal): shard \(shard) stopping, writing what it recorded")
        }
        defer { signals.cancel() }
        let progress = ProgressLine(enabled: !quiet)
        var logger = Logger(label: "pushfleet.shard")
        logger.logLevel = .warning
        var runner = ShardRunner(
            scenario: scenario, plan: plan, provenance: source.provenance, overrides: overrides, shard: shard, root: root,
            barrierTimeout: try shardFlags.barrierWait(), logger: logger
        )
        runner.startAt = try shardFlags.startInstant()
        runner.progress = { line in progress.show("shard \(shard) " + line) }
        let manifest: ShardManifest
        let result: RunResult
        do { (manifest, result) = try await runner.run(stop: stop) } catch {
            progress.finish()
            FileHandleOutput.standardError(error.description)
            throw ExitCode(ExitStatus.failure)
        }
        progress.finish()
        FileHandleOutput.standardOutput(ShardRunner.summary(manifest, result) + "shard results: \(runner.folder)")
        if manifest.status != .completed || manifest.tape?.failure != nil { throw ExitCode(ExitStatus.failure) }
    }
}
