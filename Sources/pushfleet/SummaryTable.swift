import Foundation
import PushFleetCore
import PushFleetLedger
import PushFleetReport
import PushFleetResults

/// The end-of-run summary printed to the terminal.
enum SummaryTable {
    static func render(_ r: RunResult) -> String {
        var lines: [String] = []
        let verdict = ReportFiles.verdict(r).uppercased()
        lines.append("")
        lines.append("\(r.info.scenario) — \(verdict) in \(String(format: "%.1f", r.info.durationSeconds))s (seed \(r.info.seed), \(r.info.target))")
        if r.info.aborted, let reason = r.info.abortReason { lines.append("aborted: \(reason)") }
        lines.append("devices: \(r.devices.ready)/\(r.devices.planned) ready, \(r.devices.failed) failed")
        if let generator = r.generator {
            if generator.bound {
                let outcome = r.inconclusive ? "the run is inconclusive" : "and the target failed a check no load excuses"
                lines.append("generator was the limit, \(outcome): " + generator.limits.joined(separator: "; "))
                lines.append("  what to do: \(RunResult.Generator.advice)")
            }
            for note in generator.notes { lines.append("generator: \(note)") }
        }
        let c = r.delivery
        lines.append("delivery: " + DeliveryLedger.Counts.fields.map { "\($0.name.replacingOccurrences(of: "_", with: " ")) \(c[keyPath: $0.path])" }.joined(separator: ", "))
        for line in WhyLost.lines(r) { lines.append("why " + line) }
        if let hops = r.hops, hops.view == "unknown", let note = hops.note, !(r.hops?.why.isEmpty ?? true) { lines.append("push service not watched: \(note)") }
        if let latencies = WhyLost.hopLatencies(r) { lines.append(latencies) }
        if let totals = r.incidentTotals, !totals.isEmpty {
            lines.append("incidents: " + totals.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + " (incidents.csv)")
        }
        lines.append(contentsOf: NetworkFaultsText.lines(r))
        lines.append("")
        let header = ["operation", "measure", "count", "fail", "rps", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"]
        var rows = [header]
        for op in r.operations {
            rows.append([
                op.name, op.measure, String(op.count), String(op.failures), String(format: "%.1f", op.rps), f(op.p50Ms), f(op.p90Ms), f(op.p99Ms),
                f(op.p999Ms), f(op.maxMs),
            ])
        }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            lines.append(row.enumerated().map { index, cell in
                index < 2 ? cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[index] - cell.count) + cell
            }.joined(separator: "  "))
        }
        if let errors = r.errorsLine(limit: 8) {
            lines.append("")
            lines.append("errors: " + errors)
        }
        if !r.thresholds.isEmpty {
            lines.append("")
            lines.append("thresholds:")
            for t in r.thresholds {
                let measured = t.measured.map { String(format: "%.3f", $0) + t.unit } ?? "no data"
                lines.append("  \(t.passed ? "pass" : "FAIL")  \(t.metric): \(t.expression)  (measured \(measured))\(t.origin == "default" ? "  [default gate]" : "")")
            }
        }
        return lines.joined(separator: "\n")
    }

    private static func f(_ value: Double) -> String { String(format: "%.2f", value) }
}
