import Foundation
import PushFleetLedger
public import PushFleetResults
import PushFleetCore

/// `report.html`: one self-contained page (inline CSS and SVG, no script, no network) that lets a
/// newcomer understand a run in a minute.
public enum HTMLReport {
    /// Ids of the charts every report carries (checked by the tests and by CI's browser check).
    public static let chartIDs = [
        "chart-latency-open", "chart-latency-closed", "chart-throughput", "chart-latency-time", "chart-outcomes", "chart-errors", "chart-funnel",
        "chart-hops",
    ]

    public static func render(_ r: RunResult) -> String {
        var body = header(r)
        body += section("Thresholds", id: "thresholds", thresholds(r))
        body += section("Delivery", id: "delivery", deliverySummary(r) + outcomesChart(r))
        body += networkFaults(r)
        body += section("Where pushes went", id: "hops", whereItWent(r))
        body += section("Incidents", id: "incidents", incidents(r))
        body += section("Latency by percentile", id: "latency", openLatencyChart(r) + closedLatencyChart(r))
        body += section("Over time", id: "time", throughputChart(r) + latencyOverTimeChart(r) + errorsChart(r))
        body += section("Timeline", id: "timeline", timeline(r))
        body += section("Users with the worst outcomes", id: "worst-users", worstUsers(r))
        body += section("Operations", id: "operations", operationsTable(r))
        body += section("Errors", id: "errors", errorsTable(r))
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>pushfleet — \(e(r.info.scenario)) — \(ReportFiles.verdict(r))</title>
            <style>\(css)</style></head>
            <body><main>\(body)</main></body></html>
            """
    }

    static let css = """
        body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#111;background:#fff;margin:0}
        main{max-width:980px;margin:0 auto;padding:16px 20px 48px}
        h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ccc;padding-bottom:4px}
        .verdict{display:inline-block;padding:2px 10px;border:2px solid;font-weight:700;border-radius:4px}
        .passed{color:#05603a}.failed,.aborted{color:#a8071a}.inconclusive{color:#ad6800}
        table{border-collapse:collapse;width:100%;margin:6px 0;font-variant-numeric:tabular-nums}
        th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f2f2f2}
        td:first-child,th:first-child{text-align:left}
        dl.facts{display:grid;grid-template-columns:max-content 1fr max-content 1fr;gap:2px 12px;margin:8px 0}
        dl.facts dt{color:#555}dl.facts dd{margin:0}
        svg.chart{width:100%;height:auto;margin:8px 0 16px;border:1px solid #eee}
        .chart-title{font-weight:700;font-size:14px}.tick,.legend{font-size:11px}.axis-label{font-size:12px}
        .wide{overflow-x:auto}.wide table{font-size:12px}.grid{stroke:#e5e5e5}.band{fill:#D55E00;fill-opacity:.08}.axis{stroke:#333}.marker{stroke:#666;stroke-dasharray:3 3}.marker-label{font-size:10px;fill:#444}
        .fail{font-weight:700}.note{color:#555;font-size:12px}
        @media print{main{max-width:none}svg.chart{page-break-inside:avoid}h2{page-break-after:avoid}}
        """

    static func e(_ text: String) -> String { XMLText.escape(text) }
    static func n(_ value: Double) -> String { String(format: "%.2f", value) }

    static func section(_ title: String, id: String, _ content: String) -> String {
        "<section id=\"\(id)\"><h2>\(e(title))</h2>\(content)</section>"
    }

    static func table(_ header: [String], _ rows: [[String]], id: String? = nil) -> String {
        var html = "<table\(id.map { " id=\"\($0)\"" } ?? "")><thead><tr>" + header.map { "<th>\(e($0))</th>" }.joined() + "</tr></thead><tbody>"
        for row in rows { html += "<tr>" + row.map { "<td>\($0)</td>" }.joined() + "</tr>" }
        return html + "</tbody></table>"
    }

    static func header(_ r: RunResult) -> String {
        let verdict = ReportFiles.verdict(r)
        let i = r.info
        let facts: [(String, String)] = [
            ("scenario", i.scenario), ("seed", String(i.seed)), ("target", i.target), ("pushfleet", i.version),
            ("started", i.startedAt), ("ended", i.endedAt), ("duration", String(format: "%.1f s", i.durationSeconds)),
            ("host", "\(i.host), \(i.cores) cores, \(i.memoryBytes / 1_073_741_824) GiB"), ("os", i.os),
            ("devices", "\(r.devices.ready) ready of \(r.devices.planned) (" + r.devices.byPlatform.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")"),
            ("aborted", i.aborted ? "yes — \(i.abortReason ?? "")" : "no"), ("scenario file", i.scenarioFile),
        ] + generatorFacts(r)
        return "<header id=\"header\"><h1>pushfleet: \(e(i.scenario)) <span class=\"verdict \(verdict)\" id=\"verdict\">\(verdict.uppercased())</span></h1>"
            + "<dl class=\"facts\">" + facts.map { "<dt>\(e($0.0))</dt><dd>\(e($0.1))</dd>" }.joined() + "</dl></header>"
    }

    /// Whether pushfleet kept up: its limits when it was one, and what to do.
    static func generatorFacts(_ r: RunResult) -> [(String, String)] {
        guard let generator = r.generator else { return [] }
        var facts: [(String, String)] = []
        if generator.bound {
            facts.append(("generator", "the limit — " + generator.limits.joined(separator: "; ")))
            facts.append(("what to do", RunResult.Generator.advice))
        }
        if let cpu = generator.cpuCores { facts.append(("fleet CPU", String(format: "%.2f of %d cores over the traffic", cpu, generator.cores))) }
        if let load = generator.pushService {
            let late = String(format: "%d of %d checks %.0f ms or more late", load.lateChecks, load.checks, load.lateThresholdMs)
            let demand = load.busiestLoopDemand.map { String(format: ", wanting a core %.0f%%", $0 * 100) } ?? ""
            facts.append(("push service loops", String(format: "busiest %.0f%% busy over the traffic", load.busiestLoopShare * 100) + demand + "; " + late))
            if let share = load.processCoreShare, let cores = load.processCores {
                facts.append(("push service process", String(format: "%.0f%% of its %d cores over the traffic", share * 100, cores)))
            }
        }
        return facts
    }

    static func thresholds(_ r: RunResult) -> String {
        guard !r.thresholds.isEmpty else { return "<p class=\"note\">The scenario sets no thresholds.</p>" }
        return table(
            ["metric", "rule", "from", "measured", "result"],
            r.thresholds.map { t in
                [e(t.metric), e(t.expression), t.origin == "default" ? "default gate" : "scenario",
                    t.measured.map { n($0) + (t.unit.isEmpty ? "" : " " + t.unit) } ?? "no data", t.passed ? "pass" : "<span class=\"fail\">FAIL</span>"]
            },
            id: "thresholds-table"
        ) + "<p class=\"note\">Default-gate rules apply to every metric the scenario gives no thresholds for; a scenario relaxes one by naming the metric (docs/scenarios.md).</p>"
    }

    static func deliverySummary(_ r: RunResult) -> String {
        let fields = DeliveryLedger.Counts.fields
        var rows = [["all"] + fields.map { String(r.delivery[keyPath: $0.path]) }]
        for (platform, counts) in r.deliveryByPlatform.sorted(by: { $0.key < $1.key }) {
            rows.append([e(platform)] + fields.map { String(counts[keyPath: $0.path]) })
        }
        // Spaced names wrap in a narrow column; the CSV keeps the underscores.
        // Sixteen outcomes are wider than the page: the table scrolls rather than overflows.
        return "<div class=\"wide\">" + table(["platform"] + fields.map { $0.name.replacingOccurrences(of: "_", with: " ") }, rows, id: "delivery-table") + "</div>"
            + "<p class=\"note\">Each (send, device) pair: delivered within the deadline, late, lost, misdelivered (a device that should not have got it), duplicate, indeterminate (its registration changed while the send was open), unverified (received, but its content could not be fetched), unregistered (the push service had declared the token dead) or sent to a dead token (after the backend had been told). Stale: a push from another run, or received before its send started. A leak is a read of someone else's notification that succeeded. docs/reports.md defines each.</p>"
    }

    /// What happened when: each marker (traffic start, ramp steps, faults, stop requests) and
    /// what the run saw from it until the next one.
    static func timeline(_ r: RunResult) -> String {
        guard !r.markers.isEmpty else { return "<p class=\"note\">No events were marked.</p>" }
        let markers = r.markers.sorted { $0.second < $1.second }
        var rows: [[String]] = []
        for (index, marker) in markers.enumerated() {
            let end = index + 1 < markers.count ? markers[index + 1].second : .infinity
            let seconds = r.timeseries.filter { Double($0.second) >= marker.second.rounded(.down) && Double($0.second) < end }
            var errorClasses: [String: Int] = [:]
            for second in seconds { for (name, count) in second.errorsByClass ?? [:] { errorClasses[name, default: 0] += count } }
            let top = errorClasses.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(2).map { "\($0.key) \($0.value)" }
            let worstP99 = seconds.compactMap(\.deliveryP99Ms).max()
            rows.append([
                String(format: "%.1f", marker.second), e(marker.label), String(seconds.reduce(0) { $0 + $1.sends }),
                String(seconds.reduce(0) { $0 + $1.sendFailures }), String(seconds.reduce(0) { $0 + $1.sendsDropped }),
                String(seconds.reduce(0) { $0 + $1.received }), String(seconds.reduce(0) { $0 + $1.misdelivered }),
                String(seconds.reduce(0) { $0 + $1.errors }) + (top.isEmpty ? "" : " (" + e(top.joined(separator: ", ")) + ")"),
                worstP99.map { n($0) } ?? "",
            ])
        }
        return table(
            ["s", "event", "sends", "failed", "dropped", "received", "misdelivered", "errors", "worst delivery p99 ms"], rows, id: "timeline-table"
        ) + "<p class=\"note\">Each row counts from its event to the next, by whole seconds of the time series; lost and late pairs are in Incidents with their send times.</p>"
    }

    /// The first incidents of each kind, with totals; all kept rows are in incidents.csv.
    static func incidents(_ r: RunResult) -> String {
        let totals = r.incidentTotals ?? [:]
        guard totals.values.contains(where: { $0 > 0 }) else {
            return "<p class=\"note\" id=\"incidents-none\">No incidents: nothing misdelivered, duplicated, lost, late, stale, unverified, leaked or sent to a dead token.</p>"
        }
        let kept = r.incidents ?? []
        var html = table(
            ["outcome", "total", "in incidents.csv"],
            totals.sorted { $0.key < $1.key }.map { kind, total in
                [e(kind), String(total), String(kept.filter { $0.outcome == kind }.count)]
            },
            id: "incident-totals"
        )
        var shown: [RunResult.Incident] = []
        for kind in Set(kept.map(\.outcome)).sorted() { shown += kept.filter { $0.outcome == kind }.prefix(10) }
        html += table(
            ["outcome", "send", "kind", "sender", "recipient", "device", "device user", "platform", "send start s", "event s", "detail", "hop", "reason", "trace"],
            shown.map { i in
                [
                    e(i.outcome), i.send.map(String.init) ?? "", e(i.sendKind ?? ""), e(i.sender ?? ""), e(i.recipient ?? ""),
                    i.device.map(String.init) ?? "", e(i.deviceUser ?? ""), e(i.platform ?? ""), i.sendStartSecond.map { String(format: "%.3f", $0) } ?? "",
                    i.eventSecond.map { String(format: "%.3f", $0) } ?? "", e(i.detail), e(i.hop ?? ""), e(i.reason ?? ""), traceCell(r, i),
                ]
            },
            id: "incidents-table"
        )
        return html + "<p class=\"note\">The first 10 of each outcome; incidents.csv keeps up to \(1000) of each.</p>"
    }

    /// An incident's trace id, a link where the run was given `--trace-url`.
    static func traceCell(_ r: RunResult, _ incident: RunResult.Incident) -> String {
        guard let id = r.traceID(of: incident) else { return "" }
        guard let template = r.info.traceURL, TraceURL.check(template) == nil else { return "<code>\(id)</code>" }
        return "<a class=\"trace\" href=\"\(e(TraceURL.link(template, traceID: id)))\"><code>\(id)</code></a>"
    }

    /// Grouped bars per platform; every bar carries its count as text, so it reads without colour.
    static func outcomesChart(_ r: RunResult) -> String {
        let outcomes = DeliveryLedger.Counts.fields.filter { $0.name != "expected" }.map { ($0.name.replacingOccurrences(of: "_", with: " "), $0.path) }
        let platforms = r.deliveryByPlatform.keys.sorted()
        let width = 760.0, rowHeight = 16.0, left = 130.0
        let groups = max(platforms.count, 1)
        let height = 50 + Double(groups) * (Double(outcomes.count) * rowHeight + 14)
        let maximum = Double(max(1, platforms.flatMap { p in outcomes.map { r.deliveryByPlatform[p]![keyPath: $0.1] } }.max() ?? 1))
        var svg = "<svg id=\"chart-outcomes\" class=\"chart\" role=\"img\" aria-labelledby=\"chart-outcomes-title\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" xmlns=\"http://www.w3.org/2000/svg\">"
        svg += "<title id=\"chart-outcomes-title\">Delivery outcomes per platform (pairs)</title>"
        svg += "<text x=\"10\" y=\"20\" class=\"chart-title\">Delivery outcomes per platform (count of send–device pairs)</text>"
        var y = 36.0
        for platform in platforms {
            svg += "<text x=\"10\" y=\"\(y + 10)\" class=\"axis-label\" font-weight=\"700\">\(e(platform))</text>"
            for (index, outcome) in outcomes.enumerated() {
                let value = r.deliveryByPlatform[platform]![keyPath: outcome.1]
                let barWidth = Double(value) / maximum * (width - left - 120)
                svg += "<text x=\"\(left - 6)\" y=\"\(y + 11)\" text-anchor=\"end\" class=\"tick\">\(outcome.0)</text>"
                svg += "<rect x=\"\(left)\" y=\"\(y)\" width=\"\(String(format: "%.1f", max(barWidth, value > 0 ? 1 : 0)))\" height=\"\(rowHeight - 4)\" fill=\"\(SVGChart.colours[index % SVGChart.colours.count])\" fill-opacity=\"\(index % 2 == 0 ? "1" : "0.6")\"/>"
                svg += "<text x=\"\(String(format: "%.1f", left + barWidth + 4))\" y=\"\(y + 11)\" class=\"tick\">\(value)</text>"
                y += rowHeight
            }
            y += 14
        }
        return svg + "</svg>"
    }

    static func percentileSeries(_ r: RunResult, name: String, key: String, style: Int) -> SVGChart.Series? {
        guard let histogram = r.histograms[key], histogram.count > 0 else { return nil }
        return SVGChart.Series(
            name: name, points: histogram.curve().map { (SVGChart.percentileX($0.percentile), Double($0.value) / 1e6) }, style: style
        )
    }

    static func openLatencyChart(_ r: RunResult) -> String {
        var chart = SVGChart(
            id: "chart-latency-open", title: "Open-model latency by percentile (solid: corrected from intended start; dashed: raw)",
            xLabel: "percentile (log scale of 1/(1−p))", yLabel: "latency (ms)", xTicks: SVGChart.percentileTicks
        )
        // One colour per operation; solid for corrected, dashed for raw.
        for (style, name) in [MetricName.send, MetricName.delivery, MetricName.endToEnd].enumerated() {
            if var corrected = percentileSeries(r, name: "\(name) corrected", key: name, style: style) {
                corrected.dash = ""
                chart.series.append(corrected)
            }
            if var raw = percentileSeries(r, name: "\(name) raw", key: name + ".raw", style: style) {
                raw.dash = "6 4"
                chart.series.append(raw)
            }
        }
        return chart.render()
    }

    static func closedLatencyChart(_ r: RunResult) -> String {
        var chart = SVGChart(
            id: "chart-latency-closed", title: "Device operations by percentile", xLabel: "percentile (log scale of 1/(1−p))",
            yLabel: "latency (ms)", xTicks: SVGChart.percentileTicks
        )
        for (index, name) in [MetricName.login, MetricName.registerPost, MetricName.registerPut, MetricName.connect, MetricName.fetchSecure, MetricName.fetchRich].enumerated() {
            if let series = percentileSeries(r, name: name, key: name, style: index) { chart.series.append(series) }
        }
        return chart.render()
    }

    static func markers(_ r: RunResult) -> [SVGChart.Marker] {
        r.markers.map { SVGChart.Marker(x: $0.second, label: $0.label) }
    }

    static func bands(_ r: RunResult) -> [SVGChart.Band] {
        (r.networkFaults ?? []).map { SVGChart.Band(from: $0.startSecond, to: $0.endSecond, label: "network fault #\($0.fault): \($0.label)") }
    }

    /// Each network fault's window and the ledger of the pairs it touched.
    static func networkFaults(_ r: RunResult) -> String {
        guard let windows = r.networkFaults, !windows.isEmpty else { return "" }
        let rows = windows.map { w -> [String] in
            let c = w.delivery
            return [
                "#\(w.fault) " + e(w.label), "\(NetworkFaultsText.format(w.startSecond))–\(NetworkFaultsText.format(w.endSecond))", String(w.devices),
                String(c.expected), String(c.delivered), String(c.late), String(c.replaced), String(c.lost), String(c.duplicates), String(c.recovered),
                String(c.indeterminate), String(c.misdelivered),
                ["backend", "push_service", "device", "fetch"].compactMap { name in
                    w.hopP50Ms[name].map { "\(name.replacingOccurrences(of: "_", with: " ")) \(n($0))/\(n(w.hopP99Ms[name] ?? 0))" }
                }.joined(separator: "<br>"),
            ]
        }
        let note = "<p class=\"note\">Sends that started in each window (shaded on the time charts), to the devices the fault touched. Late: held through the fault and delivered after it; replaced: held and given up for a newer push, as the platform promises; recovered: the send failed and its push arrived.</p>"
        let shrink = NetworkFaultsText.shrinking(r).map { "<p class=\"fail\" id=\"network-faults-shrink\">\(e($0))</p>" } ?? ""
        return section(
            "Network faults", id: "network-faults",
            note + "<div class=\"wide\">" + table(
                [
                    "fault", "window (s)", "devices", "expected", "delivered", "late", "replaced", "lost", "duplicates", "recovered", "indeterminate",
                    "misdelivered", "hops p50/p99 (ms)",
                ],
                rows, id: "network-faults-table"
            ) + "</div>" + shrink
        )
    }

    static func throughputChart(_ r: RunResult) -> String {
        var chart = SVGChart(id: "chart-throughput", title: "Throughput per second", xLabel: "time since start (s)", yLabel: "per second")
        chart.series = [
            .init(name: "sends started", points: r.timeseries.map { (Double($0.second), Double($0.sends)) }, style: 0),
            .init(name: "pushes received", points: r.timeseries.map { (Double($0.second), Double($0.received)) }, style: 1),
            .init(name: "devices ready", points: r.timeseries.map { (Double($0.second), Double($0.devicesReady)) }, style: 2),
            .init(name: "send failures + drops", points: r.timeseries.map { (Double($0.second), Double($0.sendFailures + $0.sendsDropped)) }, style: 3),
        ]
        chart.markers = markers(r)
        chart.bands = bands(r)
        return chart.render()
    }

    static func latencyOverTimeChart(_ r: RunResult) -> String {
        var chart = SVGChart(id: "chart-latency-time", title: "Delivery latency over time (raw, by second received)", xLabel: "time since start (s)", yLabel: "latency (ms)")
        chart.series = [
            .init(name: "p50", points: r.timeseries.compactMap { s in s.deliveryP50Ms.map { (Double(s.second), $0) } }, style: 0),
            .init(name: "p99", points: r.timeseries.compactMap { s in s.deliveryP99Ms.map { (Double(s.second), $0) } }, style: 1),
        ]
        chart.markers = markers(r)
        chart.bands = bands(r)
        return chart.render()
    }

    static func errorsChart(_ r: RunResult) -> String {
        var chart = SVGChart(id: "chart-errors", title: "Errors per second by class", xLabel: "time since start (s)", yLabel: "errors per second")
        let classes = r.errors.prefix(6).map(\.errorClass)
        for (index, label) in classes.enumerated() {
            chart.series.append(.init(name: label, points: r.timeseries.map { (Double($0.second), Double($0.errorsByClass?[label] ?? 0)) }, style: index))
        }
        chart.series.append(.init(name: "misdelivered", points: r.timeseries.map { (Double($0.second), Double($0.misdelivered)) }, style: 6))
        chart.markers = markers(r)
        chart.bands = bands(r)
        return chart.render() + (classes.isEmpty ? "<p class=\"note\">No errors.</p>" : "")
    }

    static func worstUsers(_ r: RunResult) -> String {
        func badness(_ c: DeliveryLedger.Counts) -> Int {
            (c.misdelivered + c.leaks + c.stale + c.sentToDeadToken) * 1_000_000 + (c.lost + c.unverified) * 1000 + c.late + c.duplicates
        }
        let worst = r.users.filter { badness($0.counts) > 0 }.sorted { badness($0.counts) > badness($1.counts) }.prefix(20)
        guard !worst.isEmpty else { return "<p class=\"note\" id=\"worst-users-none\">Every user got exactly what was sent to them.</p>" }
        return table(
            ["user", "devices", "expected", "delivered", "late", "lost", "misdelivered", "duplicates", "leaks", "stale", "unverified", "dead token", "p99 ms"],
            worst.map {
                let c = $0.counts
                return [e($0.user), String($0.devices), String(c.expected), String(c.delivered), String(c.late), String(c.lost), String(c.misdelivered), String(c.duplicates), String(c.leaks), String(c.stale), String(c.unverified), String(c.sentToDeadToken), $0.p99Ms.map(n) ?? ""]
            },
            id: "worst-users-table"
        ) + "<p class=\"note\">Sorted by misdeliveries and leaks, then losses, then late and duplicate pairs; all users are in users.csv.</p>"
    }

    static func operationsTable(_ r: RunResult) -> String {
        table(
            ["operation", "measure", "count", "failures", "rps", "min", "p50", "p90", "p95", "p99", "p99.9", "max (ms)"],
            r.operations.map { [e($0.name), $0.measure, String($0.count), String($0.failures), n($0.rps), n($0.minMs), n($0.p50Ms), n($0.p90Ms), n($0.p95Ms), n($0.p99Ms), n($0.p999Ms), n($0.maxMs)] },
            id: "operations-table"
        )
    }

    static func errorsTable(_ r: RunResult) -> String {
        guard !r.errors.isEmpty else { return "<p class=\"note\">No errors.</p>" }
        return table(["class", "count", "first second", "last second"], r.errors.map { [e($0.errorClass), String($0.count), String($0.firstSecond), String($0.lastSecond)] }, id: "errors-table")
    }
}
