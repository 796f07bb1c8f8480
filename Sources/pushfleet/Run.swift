import ArgumentParser
import Dispatch
import Foundation
import Logging
import PushFleetCore
import PushFleetReport
import PushFleetEngine
import PushFleetLauncher
import PushFleetMetrics
import PushFleetResults
import PushFleetScenario
import PushFleetServerSupport
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play a scenario against its target and write the reports.",
        discussion: """
            Exit codes: 0 every threshold passed; 99 a threshold failed; 2 invalid input; 1 anything \
            else (including a run stopped by a signal, whose reports are still written, marked aborted).
            """
    )

    @Argument(help: "The scenario file (YAML).") var scenario: String
    @Option(help: "Write the reports here instead of reports/<scenario>-<UTC time>/.") var out: String?
    @Option(help: "The folder that holds report folders.") var reportsDir = "reports"
    @Option(help: "Override the scenario's seed.") var seed: UInt64?
    @Flag(help: "The embedded backend sends through the embedded notification hub (as the scenario key embedded.hub: true).")
    var hub = false
    @Flag(help: "No progress line.") var quiet = false
    @Option(help: "Serve live Prometheus metrics at http://HOST:PORT/metrics while the run lasts.") var metricsListen: String?

    func validate() throws {
        if let metricsListen {
            do { _ = try ListenAddress(parsing: metricsListen) } catch { throw ValidationError("--metrics-listen: \(error)") }
        }
    }

    func run() async throws {
        var loaded = try Self.load(scenario)
        if let seed { loaded.seed = seed }
        if hub {
            guard loaded.target == .embedded else {
                FileHandleOutput.standardError("\(scenario): --hub needs the embedded target; this scenario's target is an external backend")
                throw ExitCode(ExitStatus.invalidInput)
            }
            loaded.embedded.hub = true
        }
        if let problem = FileLimit.problem(loaded, devices: FleetPlan(scenario: loaded).devices.count) {
            FileHandleOutput.standardError("\(scenario): \(problem)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        let text = (try? String(contentsOfFile: scenario, encoding: .utf8)) ?? ""
        // The report folder is made before the run, so a run is never spent on a place it cannot write.
        let directory = out ?? "\(reportsDir)/\(loaded.name)-\(Self.stamp(Date()))"
        do { try ReportWriter.prepare(directory) } catch {
            FileHandleOutput.standardError("\(error)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        let stop = StopControl()
        let signals = SignalWatcher { signal in
            switch stop.escalate(reason: "received \(signal)") {
            case .stopping:
                FileHandleOutput.standardError("\n\(signal): stopping arrivals and sends, finishing work in flight (again to stop now)")
            default:
                FileHandleOutput.standardError("\n\(signal): stopping now, writing what was recorded")
            }
        }
        defer { signals.cancel() }

        let progress = ProgressLine(enabled: !quiet)
        var logger = Logger(label: "pushfleet.run")
        logger.logLevel = .warning
        var options = FleetRunner.Options(scenarioFile: scenario, scenarioText: text, version: PushFleet.version, logger: logger) { line in
            progress.show(line)
        }
        var metricsServer: ServiceGroup?
        if let metricsListen {
            let live = LiveMetrics()
            let bound = Readiness<ListenAddress>()
            let group = ServiceGroup(
                configuration: .init(services: [.init(service: live.makeService(listen: try ListenAddress(parsing: metricsListen), bound: bound, logger: logger))], logger: logger)
            )
            Task {
                do { try await group.run() } catch { bound.fail(error) }
            }
            FileHandleOutput.standardError("metrics: \(try await bound.value().httpURL)/metrics")
            options.metrics = live
            metricsServer = group
        }
        let result = try await FleetRunner(scenario: loaded, options: options).run(stop: stop)
        progress.finish()
        // Scrapers get the final values until the reports are written.
        defer { if let metricsServer { Task { await metricsServer.triggerGracefulShutdown() } } }

        do { try ReportWriter.write(result, to: directory) } catch {
            FileHandleOutput.standardOutput(SummaryTable.render(result))
            FileHandleOutput.standardError("\(error)")
            throw ExitCode(ExitStatus.failure)
        }
        FileHandleOutput.standardOutput(SummaryTable.render(result))
        FileHandleOutput.standardOutput("reports: \(directory)")
        if result.info.aborted { throw ExitCode(ExitStatus.failure) }
        if !result.passed { throw ExitCode(ExitStatus.thresholdFailed) }
    }

    /// The scenario, or its problems on stderr and exit 2.
    static func load(_ path: String) throws -> Scenario {
        do {
            return try ScenarioLoader.load(path: path)
        } catch {
            FileHandleOutput.standardError(error.description)
            throw ExitCode(ExitStatus.invalidInput)
        }
    }

    static func stamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter.string(from: date)
    }
}

struct Validate: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Check scenario files and report every problem; exit 2 if any.")

    @Argument(help: "Scenario files.") var files: [String]
    @Flag(help: "Print the requests each device and sender will make, with example values.") var explain = false

    func run() throws {
        var failed = false
        for file in files {
            do {
                let scenario = try ScenarioLoader.load(path: file)
                let plan = FleetPlan(scenario: scenario)
                FileHandleOutput.standardOutput(
                    "ok: \(file): \(scenario.fleet.users) users, \(plan.devices.count) devices, \(scenario.traffic.count) senders, \(scenario.thresholds.count) thresholds, \(scenario.effectiveThresholds.count - scenario.thresholds.count) default-gate rules, api \(scenario.api?.name ?? "none")"
                )
                if explain { FileHandleOutput.standardOutput(APIExplain.text(scenario, file: file)) }
            } catch {
                failed = true
                FileHandleOutput.standardError(error.description)
            }
        }
        if failed { throw ExitCode(ExitStatus.invalidInput) }
    }
}

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Re-render every report file of a run folder from its run.json.")

    @Argument(help: "A run's report folder.") var directory: String

    func run() throws {
        let path = (directory as NSString).appendingPathComponent("run.json")
        guard let data = FileManager.default.contents(atPath: path) else {
            FileHandleOutput.standardError("no run.json in \(directory)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        let result: RunResult
        do { result = try ReportFiles.decodeRunJSON(data) } catch {
            FileHandleOutput.standardError("\(path) is not a pushfleet run.json: \(error)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        try ReportWriter.write(result, to: directory)
        FileHandleOutput.standardOutput("re-rendered: \(directory)")
    }
}

/// Writes the rendered report files into a folder.
enum ReportWriter {
    struct WriteError: Error, CustomStringConvertible {
        var description: String
    }

    /// Makes an empty report folder and checks that files can be written in it. An existing
    /// file, or a folder that already holds anything, is refused rather than overwritten.
    static func prepare(_ directory: String) throws(WriteError) {
        let manager = FileManager.default
        var isFolder: ObjCBool = false
        if manager.fileExists(atPath: directory, isDirectory: &isFolder) {
            guard isFolder.boolValue else { throw WriteError(description: "--out \(directory): a file is in the way; give a folder that does not exist yet") }
            let entries = (try? manager.contentsOfDirectory(atPath: directory)) ?? []
            guard entries.isEmpty else {
                throw WriteError(description: "--out \(directory): the folder exists and is not empty; give a new folder (reports are never overwritten)")
            }
        }
        do {
            try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw WriteError(description: "--out \(directory): cannot create the folder (\(error.localizedDescription))")
        }
        let probe = (directory as NSString).appendingPathComponent(".pushfleet-write-check")
        guard manager.createFile(atPath: probe, contents: Data()) else {
            throw WriteError(description: "--out \(directory): cannot write into the folder")
        }
        try? manager.removeItem(atPath: probe)
    }

    static func write(_ result: RunResult, to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for file in try ReportFiles.render(result) {
            let path = (directory as NSString).appendingPathComponent(file.name)
            guard FileManager.default.createFile(atPath: path, contents: file.data) else {
                throw WriteError(description: "cannot write \(path)")
            }
        }
    }
}

/// The live progress line: redrawn in place on a terminal, plain periodic lines otherwise.
final class ProgressLine: Sendable {
    let enabled: Bool
    let terminal = isatty(STDERR_FILENO) != 0
    private let counter = SynchronizedCounter()

    init(enabled: Bool) {
        self.enabled = enabled
    }

    func show(_ line: String) {
        guard enabled else { return }
        if terminal {
            FileHandle.standardError.write(Data("\r\u{1B}[2K\(line)".utf8))
        } else if counter.next() % 5 == 0 {
            FileHandleOutput.standardError(line)
        }
    }

    func finish() {
        if enabled && terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

final class SynchronizedCounter: Sendable {
    private let value = Mutex(0)

    func next() -> Int {
        value.withLock {
            $0 += 1
            return $0
        }
    }
}

/// Turns SIGINT and SIGTERM into calls, instead of the default immediate exit.
final class SignalWatcher {
    private let sources: [any DispatchSourceSignal]

    init(_ handler: @escaping @Sendable (String) -> Void) {
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(name) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    func cancel() {
        for source in sources { source.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}

import Synchronization

struct Compare: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compare a run with a baseline run; exit 99 on a regression.",
        discussion: "Writes compare.html into the current run's folder (or --out)."
    )

    @Argument(help: "The baseline run's report folder.") var baseline: String
    @Argument(help: "The current run's report folder.") var current: String
    @Option(help: "Allowed slowdown per percentile, e.g. 10% or 0.1.") var tolerance = "10%"
    @Option(help: "Percentiles to compare, comma-separated.") var percentiles = "50,95,99"
    @Option(help: "Slowdowns below this many milliseconds are noise.") var minDeltaMs = 1.0
    @Option(help: "Where to write compare.html.") var out: String?

    func parsedTolerance() throws -> Double {
        let text = tolerance.trimmingCharacters(in: .whitespaces)
        let value = text.hasSuffix("%") ? Double(text.dropLast()).map { $0 / 100 } : Double(text)
        guard let value, value >= 0 else { throw ValidationError("--tolerance must be a percentage like 10% or a fraction like 0.1") }
        return value
    }

    func parsedPercentiles() throws -> [Double] {
        let values = percentiles.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard !values.isEmpty, values.allSatisfy({ $0 != nil && $0! > 0 && $0! <= 100 }) else {
            throw ValidationError("--percentiles must be numbers in (0, 100], e.g. 50,99")
        }
        return values.map { $0! }
    }

    func validate() throws {
        _ = try parsedTolerance()
        _ = try parsedPercentiles()
        guard minDeltaMs >= 0 else { throw ValidationError("--min-delta-ms must not be negative") }
    }

    static func load(_ directory: String) throws -> RunResult {
        let path = (directory as NSString).appendingPathComponent("run.json")
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("no run.json in \(directory)") }
        do { return try ReportFiles.decodeRunJSON(data) } catch { throw ValidationError("\(path) is not a pushfleet run.json: \(error)") }
    }

    func run() throws {
        let base = try Self.load(baseline)
        let now = try Self.load(current)
        let comparison = RunComparison(
            baseline: base, current: now, tolerance: try parsedTolerance(), percentiles: try parsedPercentiles(), minimumDeltaMs: minDeltaMs
        )
        FileHandleOutput.standardOutput(comparison.text(baselineName: baseline, currentName: current))
        let path = out ?? (current as NSString).appendingPathComponent("compare.html")
        guard FileManager.default.createFile(atPath: path, contents: Data(comparison.html(baseline: base, current: now, baselineName: baseline, currentName: current).utf8))
        else { throw ValidationError("cannot write \(path)") }
        FileHandleOutput.standardOutput("wrote \(path)")
        if comparison.regressions > 0 { throw ExitCode(ExitStatus.thresholdFailed) }
    }
}
