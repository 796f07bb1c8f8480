public import Foundation
public import PushFleetResults
import PushFleetCore

/// A capacity search's files: `capacity.json` (everything), `steps.csv` (a row per step) and
/// `report.html` (the result, the charts of latency and throughput against offered load, and
/// the steps).
public enum CapacityReport {
    /// Ids of the charts a capacity report carries.
    public static let chartIDs = ["chart-capacity-latency", "chart-capacity-throughput"]

    public static func render(_ result: CapacityResult) throws -> [(name: String, data: Data)] {
        [
            ("capacity.json", try json(result)), ("steps.csv", Data(stepsCSV(result).utf8)), ("report.html", Data(html(result).utf8)),
        ]
    }

    public static func json(_ result: CapacityResult) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
        return try encoder.encode(result)
    }

    public static func decode(_ data: Data) throws -> CapacityResult {
        try JSONDecoder().decode(CapacityResult.self, from: data)
    }

    /// `found`, `not_reached`, `below_start`, `generator_bound`, `stopped`, `out_of_steps` or
    /// `aborted`, with `below_required` when the capacity found misses the requirement and
    /// `unconfirmed` when the bracket's low side failed a repeat and nothing below always passed.
    public static func verdict(_ result: CapacityResult) -> String {
        if result.outcome == "found" && result.capacity == nil { return "unconfirmed" }
        return result.meetsRequirement == false && result.outcome != "generator_bound" ? "below_required" : result.outcome
    }

    /// The hops as `CapacityStep.hops` names them: `MetricName.hops` without `hop.`.
    static let hopOrder = MetricName.hops.map { String($0.dropFirst("hop.".count)) }

    static func stepsCSV(_ r: CapacityResult) -> String {
        let header = [
            "step", "phase", "load", "unit", "verdict", "offered_per_s", "throughput_per_s", "devices", "delivery_p50_ms", "delivery_p99_ms",
            "send_p99_ms", "lost_ratio", "late_ratio", "expected", "lost", "backlog_start", "backlog_end",
        ] + hopOrder.flatMap { ["\($0)_p50_ms", "\($0)_p99_ms"] } + ["fleet_cpu_cores", "breaches", "generator_limits", "report"]
        let rows = r.steps.map { s -> [String] in
            [
                String(s.index), s.phase, ReportFiles.format(s.load), r.unit, s.verdict, ReportFiles.format(s.offeredRate),
                ReportFiles.format(s.throughput), String(s.devices), ReportFiles.number(s.deliveryP50Ms), ReportFiles.number(s.deliveryP99Ms),
                ReportFiles.number(s.sendP99Ms), ReportFiles.format(s.lostRatio), ReportFiles.format(s.lateRatio), String(s.expected), String(s.lost),
                String(s.backlog.first ?? 0), String(s.backlog.last ?? 0),
            ] + hopOrder.flatMap { [ReportFiles.number(s.hops[$0]?.p50Ms), ReportFiles.number(s.hops[$0]?.p99Ms)] }
                + [ReportFiles.number(s.fleetCPUCores), s.breaches.joined(separator: "; "), s.generatorLimits.joined(separator: "; "), s.report]
        }
        return ReportFiles.csv(header, rows)
    }

    static func html(_ r: CapacityResult) -> String {
        let verdict = verdict(r)
        let e = HTMLReport.e
        let facts: [(String, String)] = [
            ("capacity", r.capacity.map { "\(CapacityResult.format($0)) \(r.unit)" } ?? "not found"),
            ("bracket", "\(r.lastPass.map(CapacityResult.format) ?? "–") – \(r.firstFail.map(CapacityResult.format) ?? "–") \(r.unit)"),
            ("required", r.required.map { "\(CapacityResult.format($0)) \(r.unit)" + (r.meetsRequirement == true ? " (met)" : " (not met)") } ?? "none"),
            ("where it broke", r.brokeAt?.sentence ?? "no hop stood out"),
            ("knee of throughput", r.kneeOfThroughput.map { "\(CapacityResult.format($0)) \(r.unit)" } ?? "none found"),
            ("knee of delivery p99", r.kneeOfP99.map { "\(CapacityResult.format($0)) \(r.unit)" } ?? "none found"),
            ("USL fit", usl(r)), ("scenario", r.scenario), ("target", r.target), ("host", "\(r.host), \(r.cores) cores"),
            ("started", r.startedAt), ("ended", r.endedAt),
            ("steps", "\(r.steps.count), each judged over \(ReportFiles.format(r.windowSeconds)) s after a \(ReportFiles.format(r.warmupSeconds)) s warm-up"),
        ]
        var body = "<header id=\"header\"><h1>pushfleet capacity: \(e(r.scenario)) <span class=\"verdict \(verdict == "found" || verdict == "not_reached" ? "passed" : verdict == "generator_bound" ? "inconclusive" : "failed")\" id=\"verdict\">\(e(verdict.uppercased()))</span></h1>"
        body += "<p id=\"summary\">\(e(r.summary))</p>"
        body += "<dl class=\"facts\">" + facts.map { "<dt>\(e($0.0))</dt><dd>\(e($0.1))</dd>" }.joined() + "</dl></header>"
        body += HTMLReport.section("Latency against offered load", id: "latency", latencyChart(r))
        body += HTMLReport.section("Throughput against offered load", id: "throughput", throughputChart(r))
        body += HTMLReport.section("Steps", id: "steps", stepsTable(r))
        body += HTMLReport.section("SLO", id: "slo", "<ul>" + (r.slo + ["no misdelivery and no leak", "a backlog of unsettled pairs that stays within one deadline's worth and does not grow"]).map { "<li>\(e($0))</li>" }.joined() + "</ul>")
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>pushfleet capacity — \(e(r.scenario)) — \(e(verdict))</title>
            <style>\(HTMLReport.css)</style></head>
            <body><main>\(body)</main></body></html>
            """
    }

    public static func usl(_ r: CapacityResult) -> String {
        guard let fit = r.usl else { return "the steps do not support a fit" }
        func interval(_ i: USLFit.Interval) -> String { String(format: "[%.3g, %.3g]", i.low, i.high) }
        var text = String(format: "σ %.3g %@, κ %.3g %@, λ %.3g %@, R² %.3f", fit.sigma, interval(fit.sigmaInterval), fit.kappa, interval(fit.kappaInterval), fit.lambda, interval(fit.lambdaInterval), fit.rSquared)
        if let peak = fit.peakLoad, let top = fit.peakThroughput {
            text += String(format: "; predicted peak %.0f/s at an offered %.0f/s, falling beyond it", top, peak)
        }
        return text
    }

    /// The first run of each load, by load.
    static func curve(_ r: CapacityResult) -> [CapacityStep] {
        var seen = Set<Double>()
        return r.steps.filter { seen.insert($0.load).inserted }.sorted { $0.load < $1.load }
    }

    static func latencyChart(_ r: CapacityResult) -> String {
        let steps = curve(r)
        var chart = SVGChart(id: chartIDs[0], title: "Delivery latency (corrected) against offered load", xLabel: "offered load (\(r.unit))", yLabel: "ms")
        chart.series = [
            .init(name: "p50", points: steps.compactMap { s in s.deliveryP50Ms.map { (s.load, $0) } }, style: 0),
            .init(name: "p99", points: steps.compactMap { s in s.deliveryP99Ms.map { (s.load, $0) } }, style: 1),
        ]
        // The SLO's delivery latency bounds, as lines across the chart.
        for (index, rule) in r.slo.enumerated() {
            guard let prefix = ["delivery: p(", "delivery.latency: p("].first(where: { rule.hasPrefix($0) }), let bound = sloMilliseconds(rule),
                let low = steps.first?.load, let high = steps.last?.load
            else { continue }
            chart.series.append(.init(name: "SLO \(rule.dropFirst(prefix.count - 2))", points: [(low, bound), (high, bound)], style: 2 + index % 3))
        }
        chart.markers = markers(r)
        return chart.render()
    }

    static func throughputChart(_ r: CapacityResult) -> String {
        let steps = curve(r)
        var chart = SVGChart(
            id: chartIDs[1], title: "Achieved throughput against offered load", xLabel: "offered load (\(r.unit))", yLabel: "delivered pairs/s"
        )
        chart.series = [.init(name: "achieved", points: steps.map { ($0.load, $0.throughput) }, style: 0)]
        // Offered pairs per second: the load times the pairs a send makes at the lowest load.
        if r.vary == "rate", let first = steps.first, first.load > 0, r.windowSeconds > 0, let high = steps.last?.load {
            let pairsPerSend = Double(first.expected) / r.windowSeconds / first.load
            chart.series.append(.init(name: "offered", points: [(first.load, first.load * pairsPerSend), (high, high * pairsPerSend)], style: 6, dash: "2 3"))
        }
        if let fit = r.usl, let low = steps.first?.load, let high = steps.last?.load, high > low {
            let points = (0...40).map { i -> (x: Double, y: Double) in
                let x = low + (high - low) * Double(i) / 40
                return (x, fit.throughput(at: x))
            }
            chart.series.append(.init(name: "USL fit", points: points, style: 1))
        }
        chart.markers = markers(r)
        return chart.render()
    }

    static func markers(_ r: CapacityResult) -> [SVGChart.Marker] {
        var markers: [SVGChart.Marker] = []
        if let capacity = r.capacity { markers.append(.init(x: capacity, label: "capacity \(CapacityResult.format(capacity))")) }
        if let fail = r.firstFail { markers.append(.init(x: fail, label: "first fail")) }
        if let knee = r.kneeOfThroughput { markers.append(.init(x: knee, label: "knee")) }
        return markers
    }

    /// The bound of `delivery: p(99) < 250ms` in milliseconds.
    static func sloMilliseconds(_ rule: String) -> Double? {
        guard let op = rule.range(of: "<") else { return nil }
        var text = rule[op.upperBound...].trimmingCharacters(in: CharacterSet(charactersIn: "= "))
        var scale = 1.0
        for (suffix, factor) in [("ms", 1.0), ("us", 0.001), ("ns", 1e-6), ("s", 1000.0), ("m", 60_000.0)] where text.hasSuffix(suffix) {
            text = String(text.dropLast(suffix.count))
            scale = factor
            break
        }
        return Double(text.trimmingCharacters(in: .whitespaces)).map { $0 * scale }
    }

    static func stepsTable(_ r: CapacityResult) -> String {
        let header = ["step", "phase", "load", "verdict", "achieved/s", "p50 ms", "p99 ms", "lost", "backend p99", "push service p99", "device p99", "why"]
        let rows = r.steps.map { s -> [String] in
            [
                String(s.index), s.phase, CapacityResult.format(s.load), "<span class=\"\(s.verdict == "pass" ? "passed" : s.verdict == "invalid" ? "inconclusive" : "failed")\">\(s.verdict)</span>",
                String(format: "%.1f", s.throughput), s.deliveryP50Ms.map(HTMLReport.n) ?? "–", s.deliveryP99Ms.map(HTMLReport.n) ?? "–",
                String(format: "%.2f%%", s.lostRatio * 100), s.hops["backend"].map { HTMLReport.n($0.p99Ms) } ?? "–",
                s.hops["push_service"].map { HTMLReport.n($0.p99Ms) } ?? "–", s.hops["device"].map { HTMLReport.n($0.p99Ms) } ?? "–",
                HTMLReport.e((s.verdict == "invalid" ? s.generatorLimits : s.breaches).joined(separator: "; ")),
            ]
        }
        return HTMLReport.table(header, rows, id: "steps-table")
    }
}
