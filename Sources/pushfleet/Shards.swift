import ArgumentParser
import Foundation
import Logging
import PushFleetBench
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetReport
import PushFleetResults
import PushFleetScenario
import Subprocess

struct Shards: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play a scenario as K shard processes on this machine, as a Kubernetes Indexed Job would, and merge them.",
        discussion: """
            Each shard is `pushfleet run FILE --shards K --shard-index-from-env JOB_COMPLETION_INDEX` with \
            JOB_COMPLETION_INDEX set, all writing into one folder; then `pushfleet merge` joins them into \
            FOLDER/merged. A scenario whose target is embedded plays against one `pushfleet serve` started \
            for it. With --compare, the same scenario and seed is then played as one process against a \
            fresh `serve` and both results are shown side by side; exit 99 when their ledgers disagree. \
            Exit codes otherwise as for a run.
            """
    )

    @Argument(help: "The scenario file (YAML).") var scenario: String
    @Option(help: "How many shard processes (2–64).") var local: Int
    @Option(help: "The folder the shards share (default reports/<scenario>-shards-<UTC time>).") var out: String?
    @Option(help: "Override the scenario's seed.") var seed: UInt64?
    @Option(help: "Play against this backend (with --push-service) instead of the scenario's target.") var backend: String?
    @Option(help: "The push service that goes with --backend.") var pushService: String?
    @Flag(help: "Also play the scenario as one process and compare the two results.") var compare = false
    @Flag(help: "No progress lines from the shards.") var quiet = false
    @Option(help: "Serve a live page of the whole run at http://[HOST:]PORT/ while the shards play: each shard's state, the merged counts and rules.")
    var live: String?
    @OptionGroup(title: "Traces (of the merged run)") var traces: TraceOptions

    func validate() throws {
        guard (2...64).contains(local) else { throw ValidationError("--local \(local): give 2–64 shards") }
        if let live { _ = try LiveServer.address(live) }
        if (backend == nil) != (pushService == nil) { throw ValidationError("--backend and --push-service go together") }
        if let backend, let pushService, let problem = ScenarioOverrides.problem(withTarget: backend, pushService) {
            throw ValidationError(problem)
        }
    }

    /// The system the shards share, for as long as `body` runs: the flags', the scenario's
    /// external one, or a `serve` child, stopped when `body` returns.
    private func withSystem<Result: Sendable>(
        for scenario: Scenario, _ body: ((backend: String, pushService: String, server: ServerProcess?)?) async throws -> Result
    ) async throws -> Result {
        if let backend, let pushService { return try await body((backend, pushService, nil)) }
        switch scenario.target {
        case .external(_, .url): return try await body(nil)
        case .external(_, .embedded):
            FileHandleOutput.standardError(ShardRunner.targetProblem(scenario) ?? "")
            throw ExitCode(ExitStatus.invalidInput)
        case .embedded:
            if scenario.embedded.tls != nil || scenario.fleet.names.credentials != nil {
                FileHandleOutput.standardError(
                    "this scenario's embedded system (TLS or a credentials file) is not what a plain `pushfleet serve` starts: start one as it needs and give --backend and --push-service"
                )
                throw ExitCode(ExitStatus.invalidInput)
            }
            var arguments: [String] = []
            if scenario.embedded.hub { arguments += ["--hub", "embedded"] }
            if case .sqlite(let path) = scenario.embedded.store, !path.isEmpty { arguments += ["--store", "sqlite:" + path] }
            if case .postgres(let url) = scenario.embedded.store { arguments += ["--store", url] }
            arguments += ["--registration-ttl", "\(Int(scenario.embedded.registrationTTL.components.seconds))s"]
            return try await ServerProcess.run(arguments: arguments) { server in try await body((server.backend, server.pushService, server)) }
        }
    }

    func run() async throws {
        let source = try ScenarioSource.load(scenario, overrides: ScenarioOverrides(seed: seed))
        let loaded = source.scenario
        let folder = out ?? "reports/\(loaded.name)-shards-\(Run.stamp(Date()))"
        try ReportWriter.prepareOrRefuse(folder)
        let executable = PushFleetExecutable.path
        let runID = FleetRunner.makeRunID()

        let common = (seed.map { ["--seed", String($0)] } ?? []) + (quiet ? ["--quiet"] : [])
        // Signals are the shards' from their start to the end of the command, the merge and the
        // comparison included.
        // From here on a signal stops the shards (those not yet started, at their start).
        let running = RunningShards()
        let signals = SignalWatcher { signal in
            FileHandleOutput.standardError("\n\(signal): stopping the shards; they write what they recorded")
            running.terminate()
        }
        defer { signals.cancel() }
        let broadcast = live.map { _ in LiveBroadcast() }
        let traceURL = traces.traceUrl
        var logger = Logger(label: "pushfleet.shards")
        logger.logLevel = .warning
        let result = try await LiveServer.serving(broadcast, at: live, logger: logger) { () async throws -> RunResult in
            // The whole run followed from the shards' folder while they play.
            let following = broadcast.map { broadcast in
                Task { await Merge.follow(folder, broadcast: broadcast, window: .seconds(10), within: .seconds(86_400)) }
            }
            var began = ContinuousClock.now
            let statuses = try await withSystem(for: loaded) { system in
                var target: [String] = []
                if let system { target = ["--backend", system.backend, "--push-service", system.pushService] }
                FileHandleOutput.standardOutput("\(local) shards of \(loaded.name), run \(runID), into \(folder)" + (system.map { " against \($0.backend)" } ?? ""))
                began = ContinuousClock.now
                let shards = (0..<local).map { index in
                    Child(
                        arguments: ["run", scenario, "--shards", String(local), "--shard-index-from-env", "JOB_COMPLETION_INDEX", "--out", folder, "--run-id", runID]
                            + target + common,
                        shardIndex: index, log: (folder as NSString).appendingPathComponent("shard-\(index).log")
                    )
                }
                let statuses = try await Self.play(executable, shards, running: running)
                if let server = system?.server {
                    FileHandleOutput.standardOutput(
                        String(format: "serve (the system under test): peak RSS %.1f MiB, %.1f CPU-s", Double(server.peakResidentBytes()) / 1_048_576, server.cpuSeconds())
                    )
                }
                return statuses
            }
            // Every shard has ended: the follower's last look is of the tapes as they were left.
            following?.cancel()
            await following?.value
            let shardSeconds = (ContinuousClock.now - began) / .seconds(1)
            for (index, status) in statuses.enumerated() where status != .exited(0) {
                FileHandleOutput.standardError("shard \(index) \(Self.describe(status)): see \(folder)/shard-\(index).log")
            }
            FileHandleOutput.standardOutput(String(format: "shards done in %.1f s; merging", shardSeconds))
            let merged = (folder as NSString).appendingPathComponent("merged")
            let result = try Merge.merge([folder], out: merged, traceURL: traceURL)
            broadcast?.close(LiveServer.end(result, reports: merged))
            return result
        }
        let merged = (folder as NSString).appendingPathComponent("merged")
        await TraceExport.export(result, options: traces)
        FileHandleOutput.standardOutput("reports: \(merged)")
        if compare {
            try await compareWithSingle(result, folder: folder, executable: executable, common: common, loaded: loaded)
        }
        try Merge.exit(for: result)
    }

    /// Plays the scenario as one process against a fresh system and prints both side by side;
    /// exits 99 when the ledgers or the operation counts differ.
    private func compareWithSingle(_ sharded: RunResult, folder: String, executable: String, common: [String], loaded: Scenario) async throws {
        let single = (folder as NSString).appendingPathComponent("single")
        let (status, peak) = try await withSystem(for: loaded) { system in
            var target: [String] = []
            if let system { target = ["--backend", system.backend, "--push-service", system.pushService] }
            FileHandleOutput.standardOutput("the same scenario as one process, into \(single)")
            return try await Self.playMeasured(
                executable, Child(arguments: ["run", scenario, "--out", single] + target + common, log: (folder as NSString).appendingPathComponent("single.log"))
            )
        }
        FileHandleOutput.standardOutput(String(format: "single run: peak RSS %.1f MiB", Double(peak) / 1_048_576))
        guard let data = FileManager.default.contents(atPath: (single as NSString).appendingPathComponent("run.json")),
            let result = try? ReportFiles.decodeRunJSON(data)
        else {
            FileHandleOutput.standardError("the single run wrote no run.json (\(Self.describe(status))): see \(folder)/single.log")
            throw ExitCode(ExitStatus.failure)
        }
        let comparison = ShardComparison(single: result, sharded: sharded, shards: local)
        FileHandleOutput.standardOutput(comparison.table)
        if !comparison.agree {
            FileHandleOutput.standardError("the single run and the shards disagree: " + comparison.differences.joined(separator: "; "))
            throw ExitCode(ExitStatus.thresholdFailed)
        }
    }
}
