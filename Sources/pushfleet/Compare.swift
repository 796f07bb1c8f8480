import ArgumentParser
import Foundation
import PushFleetLauncher
import PushFleetReport
import PushFleetResults

struct Compare: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compare a run with a baseline run, or a capacity search with a baseline search; exit 99 on a regression.",
        discussion: """
            Writes compare.html into the current run's folder (or --out). Two capacity report folders \
            (capacity.json) compare their capacities: a current capacity more than --tolerance below the \
            baseline's is a regression (99); a search bounded by its generator is inconclusive (3).
            """
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

    /// Two capacity searches, when both folders hold one; an error when only one does.
    func capacities() throws -> CapacityComparison? {
        func load(_ directory: String) throws -> CapacityResult? {
            let path = (directory as NSString).appendingPathComponent("capacity.json")
            guard let data = FileManager.default.contents(atPath: path) else { return nil }
            do { return try CapacityReport.decode(data) } catch { throw ValidationError("\(path) is not a pushfleet capacity.json: \(error)") }
        }
        switch (try load(baseline), try load(current)) {
        case (let base?, let now?): return CapacityComparison(baseline: base, current: now, tolerance: try parsedTolerance())
        case (nil, nil): return nil
        default: throw ValidationError("one folder holds a capacity search and the other a run: compare like with like")
        }
    }

    static func load(_ directory: String) throws -> RunResult {
        let path = (directory as NSString).appendingPathComponent("run.json")
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("no run.json in \(directory)") }
        do { return try ReportFiles.decodeRunJSON(data) } catch { throw ValidationError("\(path) is not a pushfleet run.json: \(error)") }
    }

    func run() throws {
        if let comparison = try capacities() {
            FileHandleOutput.standardOutput(comparison.text(baselineName: baseline, currentName: current))
            switch comparison.verdict {
            case "regressed": throw ExitCode(ExitStatus.thresholdFailed)
            case "inconclusive": throw ExitCode(ExitStatus.inconclusive)
            default: return
            }
        }
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
