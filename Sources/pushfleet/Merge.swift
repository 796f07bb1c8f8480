import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetLauncher
import PushFleetReport
import PushFleetResults
import PushFleetScenario

struct Merge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Join the shards of a run into one result and write its reports.",
        discussion: """
            Give the run's folder (the --out its shards shared) or the shards' own folders. Their event \
            tapes are replayed into one ledger on one time line, so a send made in one shard to a device \
            in another is judged exactly; histograms are merged without loss; the thresholds are judged \
            on the whole. A shard that is missing, stopped early, or whose tape is cut is named and the \
            result is marked aborted. Exit codes as for a run: 0 passed, 99 a threshold failed, \
            3 inconclusive, 2 invalid input, 1 aborted (a shard missing or stopped) or anything else.
            """
    )

    @Argument(help: "The run's folder, or shard folders (shard-I-of-K).") var folders: [String]
    @Option(help: "Write the merged reports here (a new folder).") var out: String
    @Option(help: "Wait up to this long for every shard to finish (a merge Job started beside the shards).") var wait: String?
    @Flag(help: "Follow the run while its shards play (its folder only), until every shard has ended or --wait has passed; then merge.")
    var follow = false
    @Option(help: "With --follow: serve a live page of the whole run at http://[HOST:]PORT/ (every shard's state, the merged counts and rules).")
    var live: String?
    @OptionGroup(title: "Traces") var traces: TraceOptions

    func validate() throws {
        if folders.isEmpty { throw ValidationError("give the run's folder or its shard folders") }
        if let wait {
            let duration: Duration
            do { duration = try DurationText.parse(wait) } catch { throw ValidationError("--wait: \(error)") }
            guard duration <= .seconds(86_400) else { throw ValidationError("--wait \(wait): at most 24h") }
        }
        if let live {
            _ = try LiveServer.address(live)
            guard follow else { throw ValidationError("--live needs --follow: a merge of shards that have ended has nothing to watch") }
        }
        if follow, folders.count != 1 { throw ValidationError("--follow takes the run's folder (the --out its shards share), one") }
    }

    func run() async throws {
        try ReportWriter.prepareOrRefuse(out)
        if follow {
            let limit = try wait.map { try DurationText.parse($0) } ?? .seconds(86_400)
            let broadcast = live.map { _ in LiveBroadcast() }
            var logger = Logger(label: "pushfleet.merge")
            logger.logLevel = .warning
            let (folders, out, traceURL) = (folders, out, traces.traceUrl)
            let result = try await LiveServer.serving(broadcast, at: live, logger: logger) { () async throws -> RunResult in
                await Self.follow(folders[0], broadcast: broadcast, window: .seconds(10), within: limit)
                let result = try Self.merge(folders, out: out, traceURL: traceURL)
                broadcast?.close(LiveServer.end(result, reports: out))
                return result
            }
            await TraceExport.export(result, options: traces)
            FileHandleOutput.standardOutput("reports: \(out)")
            try Self.exit(for: result)
            return
        }
        if let wait { try await Self.waitForShards(folders, wait: try DurationText.parse(wait), as: wait) }
        let result = try Self.merge(folders, out: out, traceURL: traces.traceUrl)
        await TraceExport.export(result, options: traces)
        FileHandleOutput.standardOutput("reports: \(out)")
        try Self.exit(for: result)
    }

    /// Merges and writes the reports; prints the summary and a line per shard.
    static func merge(_ folders: [String], out: String, traceURL: String? = nil) throws -> RunResult {
        let began = ContinuousClock.now
        let loaded: [ShardMerge.Loaded]
        let scenario: Scenario
        do {
            loaded = try ShardMerge.load(try ShardMerge.folders(folders))
            _ = try ShardMerge.check(loaded)
        } catch {
            FileHandleOutput.standardError("\(error)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        let manifest = loaded[0].manifest
        let overrides = ScenarioOverrides(
            seed: manifest.overrides.seed, hub: manifest.overrides.hub,
            target: manifest.overrides.backend.flatMap { backend in manifest.overrides.pushService.map { (backend, $0) } }
        )
        do {
            scenario = try ScenarioLoader.load(text: manifest.scenarioText, file: manifest.scenarioFile, overrides: overrides).scenario
        } catch {
            FileHandleOutput.standardError("the shards' scenario (\(manifest.scenarioFile), as recorded in shard.json) does not load here:\n\(error)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        var (result, lines): (RunResult, [ShardMerge.ShardLine])
        do { (result, lines) = try ShardMerge.merge(loaded, scenario: scenario, version: PushFleet.version) } catch {
            FileHandleOutput.standardError("\(error)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        result.info.traceURL = traceURL
        do { try ReportWriter.write(result, to: out) } catch {
            FileHandleOutput.standardOutput(SummaryTable.render(result))
            FileHandleOutput.standardError("\(error)")
            throw ExitCode(ExitStatus.failure)
        }
        let seconds = (ContinuousClock.now - began) / .seconds(1)
        FileHandleOutput.standardOutput(SummaryTable.render(result))
        var table = "shards (run \(manifest.runID)):\n"
        for line in lines {
            let rss = line.peakResidentBytes.map { String(format: "%.1f MiB", Double($0) / 1_048_576) } ?? "–"
            table += "  \(line.shard)  \(line.status)  events \(line.events.grouped)  tape \(line.tapeBytes.grouped) B  peak RSS \(rss)"
            table += (line.problem.map { "  — \($0)" } ?? "") + "\n"
        }
        let merged = ProcessMemory.peakResident().map { String(format: "%.1f MiB", Double($0) / 1_048_576) } ?? "–"
        table += String(format: "merged in %.2f s, peak RSS of the merge %@", seconds, merged)
        FileHandleOutput.standardOutput(table)
        return result
    }

    /// Waits until every shard of the run has written its `shard.json`, or the wait ends (the
    /// merge then names the shards still missing).
    static func waitForShards(_ given: [String], wait: Duration, as text: String) async throws {
        let deadline = ContinuousClock.now + wait
        while ContinuousClock.now < deadline {
            if let folders = try? ShardMerge.folders(given), let loaded = try? ShardMerge.load(folders), let first = loaded.first,
                Set(loaded.map(\.manifest.index)).count == first.manifest.count
            {
                return
            }
            try await Task.sleep(for: .seconds(2))
        }
        FileHandleOutput.standardError("waited \(text) for the shards; merging what is there")
    }

    static func exit(for result: RunResult) throws {
        let code = ExitStatus.of(result)
        if code != ExitStatus.passed { throw ExitCode(code) }
    }
}
