import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetReport
import PushFleetResults
import PushFleetScenario
import PushFleetTraces
import Synchronization

struct Capacity: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find the highest send rate (or fleet size) the target sustains at the scenario's SLO.",
        discussion: """
            The scenario's capacity: section says what to vary and how (docs/capacity.md). Each step is a run \
            of its own, judged over its window after a warm-up; the reports go to capacity.json, steps.csv, \
            report.html and a folder per step. Exit codes: 0 a capacity was found (at least the requirement, \
            when one is given); 99 the capacity is below the requirement, the first step already failed, or a \
            misdelivery or leak stopped the search, or no load passed every one of its runs; 3 inconclusive (pushfleet was the limit before the target \
            was); 2 invalid input; 1 anything else (an interrupted search still writes what it found).
            """
    )

    @Argument(help: "The scenario file (YAML) with a capacity: section.") var scenario: String
    @Option(help: "Write the reports here instead of reports/<scenario>-capacity-<UTC time>/.") var out: String?
    @Option(help: "The folder that holds report folders.") var reportsDir = "reports"
    @Option(help: "Override the scenario's seed.") var seed: UInt64?
    @Flag(help: "The embedded backend sends through the embedded notification hub.") var hub = false
    @Flag(help: "No progress line.") var quiet = false
    @Option(help: "The least capacity that passes: a rate such as 500/s (vary: rate) or a number of devices (vary: devices).")
    var require: String?
    @Option(help: "Serve a live page of the search at http://[HOST:]PORT/ while it lasts: the steps so far, the current one live.")
    var live: String?
    @OptionGroup(title: "Traces (every step's)") var traces: TraceOptions

    func validate() throws {
        if let live { _ = try LiveServer.address(live) }
    }

    func run() async throws {
        let source = try ScenarioSource.load(scenario, overrides: ScenarioOverrides(seed: seed, hub: hub ? true : nil))
        let loaded = source.scenario
        guard let capacity = loaded.capacity else {
            FileHandleOutput.standardError("\(scenario): \(MissingCapacityError().description)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        let required = try Self.required(require, vary: capacity.vary)
        // The largest fleet the search can ask for must fit the open-files limit.
        let largest = capacity.vary == .devices ? loaded.capacityStep(capacity.maximum) : loaded
        try FileLimit.refuseBeyondLimit(largest, plan: FleetPlan(scenario: largest, runID: FleetRunner.makeRunID()), file: scenario)
        let directory = out ?? "\(reportsDir)/\(loaded.name)-capacity-\(Run.stamp(Date()))"
        try ReportWriter.prepareOrRefuse(directory)
        let stop = StopControl()
        let signals = SignalWatcher { signal in
            switch stop.escalate(reason: "received \(signal)") {
            case .stopping: FileHandleOutput.standardError("\n\(signal): ending the step under way and the search (again to stop now)")
            default: FileHandleOutput.standardError("\n\(signal): stopping now, writing what was found")
            }
        }
        defer { signals.cancel() }
        let progress = ProgressLine(enabled: !quiet)
        var logger = Logger(label: "pushfleet.capacity")
        logger.logLevel = .warning
        var options = FleetRunner.Options(provenance: source.provenance, logger: logger) { line in progress.show(line) }
        let exporting = try? traces.configuration()
        // One ring per server for every step's spans: the search's last steps are the ones kept.
        let tracing = loaded.tracing
        options.serverSpans = exporting == nil ? nil : ServerSpans(keeping: { tracing.samples($0) })
        var runner = CapacityRunner(scenario: loaded, options: options)
        let traceURL = traces.traceUrl
        // Each step's traces, built as it is written, exported together once the search ends.
        let stepTraces = Mutex<[RunTraces.Built?]>([])
        runner.writeStep = { result, folder in
            var result = result
            result.info.traceURL = traceURL
            try ReportWriter.write(result, to: (directory as NSString).appendingPathComponent(folder))
            if exporting != nil { stepTraces.withLock { $0.append(RunTraces.build(result)) } }
        }
        runner.stepDone = { line in
            progress.finish()
            FileHandleOutput.standardOutput(line)
        }
        let broadcast = live.map { _ in LiveBroadcast() }
        if let broadcast {
            broadcast.open(LiveServer.hello(loaded, capacity: capacity, window: options.liveWindow))
            runner.options.live = { frame in
                let (event, json) = LiveServer.frame(frame)
                broadcast.publish(event, json: json)
            }
            runner.stepStarted = { index, phase, load in broadcast.publish(LiveServer.stepStarted(index, phase: phase, load: load)) }
            runner.stepRecorded = { step, lastPass, firstFail in broadcast.publish(LiveServer.stepRecorded(step, lastPass: lastPass, firstFail: firstFail)) }
        }
        let search = runner
        let serverSpans = options.serverSpans
        // The page is served until the search's reports are written and its verdict is said.
        let result = try await LiveServer.serving(broadcast, at: live, logger: logger) { () async throws -> CapacityResult in
            let result = try await search.run(required: required, stop: stop)
            progress.finish()
            await TraceExport.export(stepTraces.withLock { $0 }, version: PushFleet.version, to: exporting, servers: serverSpans)
            do {
                for file in try CapacityReport.render(result) {
                    let path = (directory as NSString).appendingPathComponent(file.name)
                    guard FileManager.default.createFile(atPath: path, contents: file.data) else { throw ReportWriter.WriteError(description: "cannot write \(path)") }
                }
            } catch {
                FileHandleOutput.standardError("\(error)")
                broadcast?.close(LiveServer.end(result, exitCode: ExitStatus.failure, reports: directory))
                throw ExitCode(ExitStatus.failure)
            }
            broadcast?.close(LiveServer.end(result, exitCode: Self.exitCode(result), reports: directory))
            return result
        }
        FileHandleOutput.standardOutput(Self.summary(result))
        FileHandleOutput.standardOutput("reports: \(directory)")
        throw ExitCode(Self.exitCode(result))
    }

    static func exitCode(_ result: CapacityResult) -> Int32 {
        switch result.outcome {
        case "aborted", "out_of_steps": return ExitStatus.failure
        case "generator_bound": return ExitStatus.inconclusive
        case "below_start", "stopped": return ExitStatus.thresholdFailed
        case "found" where result.capacity == nil: return ExitStatus.thresholdFailed
        default: return result.meetsRequirement == false ? ExitStatus.thresholdFailed : ExitStatus.passed
        }
    }

    static func summary(_ r: CapacityResult) -> String {
        var lines = ["", "\(r.scenario) capacity — \(CapacityReport.verdict(r).uppercased())", r.summary]
        if let required = r.required {
            lines.append("required \(CapacityResult.format(required)) \(r.unit): \(r.meetsRequirement == true ? "met" : "NOT met")")
        }
        for spread in r.spread {
            let p99 = spread.p99MinMs.map { min in String(format: "delivery p99 %.1f–%.1f ms", min, spread.p99MaxMs ?? min) } ?? "no deliveries"
            lines.append(
                "\(CapacityResult.format(spread.load)) \(r.unit) × \(spread.runs): \(spread.verdicts.joined(separator: " ")), \(p99), achieved \(String(format: "%.1f–%.1f", spread.throughputMin, spread.throughputMax))/s"
            )
        }
        if let knee = r.kneeOfThroughput { lines.append("knee of throughput: \(CapacityResult.format(knee)) \(r.unit)") }
        if let knee = r.kneeOfP99 { lines.append("knee of delivery p99: \(CapacityResult.format(knee)) \(r.unit)") }
        lines.append("USL: \(CapacityReport.usl(r))")
        return lines.joined(separator: "\n")
    }

    /// `--require`: a rate with `vary: rate`, a number of devices with `vary: devices`.
    static func required(_ text: String?, vary: Scenario.Capacity.Vary) throws -> Double? {
        guard let text else { return nil }
        switch vary {
        case .rate:
            guard let rate = try? Rate(parsing: text), Scenario.Capacity.rateRange.contains(rate.perSecond) else {
                throw ValidationError("--require: '\(text)' is not a rate between 0.1/s and 1000000/s (e.g. 500/s)")
            }
            return rate.perSecond
        case .devices:
            guard let devices = Int(text), (1...Scenario.Fleet.maximumDevices).contains(devices) else {
                throw ValidationError("--require: '\(text)' is not a number of devices between 1 and \(Scenario.Fleet.maximumDevices)")
            }
            return Double(devices)
        }
    }
}
