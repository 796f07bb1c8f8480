import Foundation
import PushFleetLedger
public import PushFleetResults
import PushFleetCore

/// A baseline run against a current one: latency percentiles per operation and the
/// correctness counts side by side, with regressions flagged.
public struct RunComparison: Sendable {
    public struct Row: Sendable {
        public var operation: String
        public var measure: String
        public var percentile: Double
        public var baselineMs: Double
        public var currentMs: Double
        public var regressed: Bool

        public var change: Double { baselineMs == 0 ? 0 : (currentMs - baselineMs) / baselineMs }
    }

    public struct CountRow: Sendable {
        public var name: String
        public var baseline: Int
        public var current: Int
        public var regressed: Bool
    }

    public var rows: [Row]
    public var counts: [CountRow]
    /// Pairs lost at each hop, baseline against current (from each run's "why lost").
    public var lostByHop: [CountRow]
    public var tolerance: Double
    public var minimumDeltaMs: Double

    public var regressions: Int { rows.filter(\.regressed).count + counts.filter(\.regressed).count }

    /// - Parameters:
    ///   - tolerance: relative slack on each percentile (0.1 = 10% slower still passes).
    ///   - percentiles: the percentiles compared, 0...100.
    ///   - minimumDeltaMs: a slowdown smaller than this is noise, whatever its ratio.
    public init(baseline: RunResult, current: RunResult, tolerance: Double, percentiles: [Double], minimumDeltaMs: Double) {
        self.tolerance = tolerance
        self.minimumDeltaMs = minimumDeltaMs
        var rows: [Row] = []
        for operation in current.operations where operation.measure != "raw" {
            guard let base = baseline.histograms[operation.name], let now = current.histograms[operation.name], base.count > 0, now.count > 0
            else { continue }
            for p in percentiles {
                let b = Double(base.percentile(p)) / 1e6
                let c = Double(now.percentile(p)) / 1e6
                rows.append(
                    Row(operation: operation.name, measure: operation.measure, percentile: p, baselineMs: b, currentMs: c,
                        regressed: c > b * (1 + tolerance) && c - b > minimumDeltaMs)
                )
            }
        }
        self.rows = rows
        let pairs: [(String, KeyPath<DeliveryLedger.Counts, Int>)] = [
            ("misdelivered", \.misdelivered), ("leaks", \.leaks), ("lost", \.lost), ("duplicates", \.duplicates), ("late", \.late),
        ]
        counts = pairs.map { name, key in
            CountRow(name: name, baseline: baseline.delivery[keyPath: key], current: current.delivery[keyPath: key],
                regressed: current.delivery[keyPath: key] > baseline.delivery[keyPath: key] && name != "late")
        } + [
            CountRow(name: "send failures", baseline: Int(baseline.counters["sends.failed"] ?? 0), current: Int(current.counters["sends.failed"] ?? 0), regressed: false),
        ]
        func lost(_ r: RunResult) -> [String: Int] {
            (r.hops?.why ?? []).filter { $0.outcome == "lost" }.reduce(into: [:]) { $0[$1.hop, default: 0] += $1.count }
        }
        let (before, after) = (lost(baseline), lost(current))
        lostByHop = Set(before.keys).union(after.keys).sorted().map { hop in
            CountRow(name: "lost at the \(hop.replacingOccurrences(of: "_", with: " "))", baseline: before[hop] ?? 0, current: after[hop] ?? 0, regressed: false)
        }
    }

    /// The hop whose latency regressed most (by its largest relative change among regressed
    /// percentiles), in words: which hop made the delivery slower.
    public var slowestHop: String? {
        let hopRows = rows.filter { $0.regressed && $0.operation.hasPrefix("hop.") }
        guard let worst = hopRows.max(by: { $0.change < $1.change }) else { return nil }
        let name = worst.operation.dropFirst("hop.".count).replacingOccurrences(of: "_", with: " ")
        return "the \(name) hop regressed most: p\(SVGChart.number(worst.percentile)) "
            + String(format: "%.2f → %.2f ms (%+.1f%%)", worst.baselineMs, worst.currentMs, worst.change * 100)
    }

    public func text(baselineName: String, currentName: String) -> String {
        var lines = ["baseline: \(baselineName)", "current:  \(currentName)", "tolerance: \(Int(tolerance * 100))% (and at least \(minimumDeltaMs) ms)", ""]
        let header = ["operation", "measure", "pct", "baseline ms", "current ms", "change", ""]
        var table = [header]
        for row in rows {
            table.append([
                row.operation, row.measure, "p\(SVGChart.number(row.percentile))", String(format: "%.2f", row.baselineMs),
                String(format: "%.2f", row.currentMs), String(format: "%+.1f%%", row.change * 100), row.regressed ? "REGRESSION" : "",
            ])
        }
        let widths = header.indices.map { column in table.map { $0[column].count }.max() ?? 0 }
        lines += table.map { row in row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ") }
        lines.append("")
        for count in counts {
            lines.append("\(count.name): \(count.baseline) → \(count.current)\(count.regressed ? "  REGRESSION" : "")")
        }
        for count in lostByHop { lines.append("\(count.name): \(count.baseline) → \(count.current)") }
        if let slowestHop { lines.append(slowestHop) }
        lines.append("")
        lines.append(regressions == 0 ? "no regressions" : "\(regressions) regression(s)")
        return lines.joined(separator: "\n")
    }

    /// `compare.html`: both runs' percentile curves on the same axes, and the tables.
    public func html(baseline: RunResult, current: RunResult, baselineName: String, currentName: String) -> String {
        var charts = ""
        for (index, name) in (MetricName.operations).enumerated() {
            guard let b = HTMLReport.percentileSeries(baseline, name: "baseline", key: name, style: 6),
                let c = HTMLReport.percentileSeries(current, name: "current", key: name, style: 0)
            else { continue }
            var chart = SVGChart(
                id: "compare-\(index)", title: "\(name): baseline (dotted) vs current (solid)", xLabel: "percentile (log scale of 1/(1−p))",
                yLabel: "latency (ms)", xTicks: SVGChart.percentileTicks
            )
            var dotted = b
            dotted.style = 2
            chart.series = [dotted, c]
            charts += chart.render()
        }
        let rowsHTML = HTMLReport.table(
            ["operation", "measure", "percentile", "baseline ms", "current ms", "change", "verdict"],
            rows.map {
                [HTMLReport.e($0.operation), $0.measure, "p" + SVGChart.number($0.percentile), HTMLReport.n($0.baselineMs), HTMLReport.n($0.currentMs),
                    String(format: "%+.1f%%", $0.change * 100), $0.regressed ? "<span class=\"fail\">REGRESSION</span>" : "ok"]
            },
            id: "compare-table"
        )
        let countsHTML = HTMLReport.table(
            ["count", "baseline", "current", "verdict"],
            (counts + lostByHop).map { [HTMLReport.e($0.name), String($0.baseline), String($0.current), $0.regressed ? "<span class=\"fail\">REGRESSION</span>" : "ok"] }
        ) + (slowestHop.map { "<p id=\"slowest-hop\">\(HTMLReport.e($0))</p>" } ?? "")
        let verdict = regressions == 0 ? "passed" : "failed"
        return """
            <!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>pushfleet compare</title><style>\(HTMLReport.css)</style></head>
            <body><main><h1>pushfleet compare <span class="verdict \(verdict)">\(regressions == 0 ? "NO REGRESSIONS" : "\(regressions) REGRESSION(S)")</span></h1>
            <p>baseline: \(HTMLReport.e(baselineName)) (\(HTMLReport.e(baseline.info.startedAt)))<br>current: \(HTMLReport.e(currentName)) (\(HTMLReport.e(current.info.startedAt)))<br>
            tolerance \(Int(tolerance * 100))%, minimum change \(minimumDeltaMs) ms</p>
            <h2>Latency</h2>\(rowsHTML)<h2>Correctness</h2>\(countsHTML)<h2>Curves</h2>\(charts)</main></body></html>
            """
    }
}
