public import Foundation
import PushFleetLedger
public import PushFleetResults
import PushFleetCore

/// Renders every report file of a run from its ``RunResult`` alone. Each file is produced in
/// pieces (``ReportFile``), so the per-user rows of a million-device run are never whole in
/// memory as text; ``render(_:)`` joins them for callers that want bytes.
public enum ReportFiles {
    public static func files(_ result: RunResult) -> [ReportFile] {
        [
            runJSONFile(result),
            ReportFile(name: "summary.csv") { emit in try emit(Data(summaryCSV(result).utf8)) },
            ReportFile(name: "operations.csv") { emit in try emit(Data(operationsCSV(result).utf8)) },
            ReportFile(name: "users.csv") { emit in try writeUsersCSV(result, emit: emit) },
            ReportFile(name: "timeseries.csv") { emit in try emit(Data(timeseriesCSV(result).utf8)) },
            ReportFile(name: "errors.csv") { emit in try emit(Data(errorsCSV(result).utf8)) },
            ReportFile(name: "incidents.csv") { emit in try emit(Data(incidentsCSV(result).utf8)) },
            ReportFile(name: "junit.xml") { emit in try emit(Data(JUnitReport.render(result).utf8)) },
            ReportFile(name: "report.html") { emit in try emit(Data(HTMLReport.render(result).utf8)) },
        ]
    }

    public static func render(_ result: RunResult) throws -> [(name: String, data: Data)] {
        try files(result).map { ($0.name, try $0.data()) }
    }

    public static func runJSON(_ result: RunResult) throws -> Data {
        try runJSONFile(result).data()
    }

    static func runJSONFile(_ result: RunResult) -> ReportFile {
        ReportFile(name: "run.json") { emit in try RunJSONStream.write(result, emit: emit) }
    }

    static func runJSONEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        // Not pretty-printed: the histograms' bucket arrays would take a line per number.
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    public static func decodeRunJSON(_ data: Data) throws -> RunResult {
        try JSONDecoder().decode(RunResult.self, from: data)
    }

    /// `passed`, `failed` (a threshold failed), `inconclusive` (the generator was the limit) or
    /// `aborted`.
    public static func verdict(_ result: RunResult) -> String {
        result.info.aborted ? "aborted" : result.passed ? "passed" : result.inconclusive ? "inconclusive" : "failed"
    }

    static func summaryCSV(_ r: RunResult) -> String {
        let c = r.delivery
        var rows: [(String, String)] = [
            ("scenario", r.info.scenario), ("seed", String(r.info.seed)), ("run_id", r.info.runID ?? ""), ("target", r.info.target),
            ("started_at", r.info.startedAt), ("ended_at", r.info.endedAt), ("duration_s", format(r.info.durationSeconds)),
            ("result", verdict(r)), ("aborted", String(r.info.aborted)), ("abort_reason", r.info.abortReason ?? ""),
            ("devices_planned", String(r.devices.planned)), ("devices_ready", String(r.devices.ready)),
            ("devices_failed", String(r.devices.failed)), ("sends", number(r.counters["sends"])),
            ("sends_failed", number(r.counters["sends.failed"])), ("sends_dropped", number(r.counters["sends.dropped"])),
            ("sends_late_start", number(r.counters["sends.late_start"])),
        ]
        for field in DeliveryLedger.Counts.fields { rows.append((field.name, String(c[keyPath: field.path]))) }
        // Each platform's pairs, under `<platform>.<outcome>`.
        for (platform, counts) in r.deliveryByPlatform.sorted(by: { $0.key < $1.key }) {
            for field in DeliveryLedger.Counts.fields { rows.append(("\(platform).\(field.name)", String(counts[keyPath: field.path]))) }
        }
        let failed = r.thresholds.filter { !$0.passed }.map { "\($0.metric): \($0.expression)" }
        rows += [
            ("errors", number(r.counters["errors"])),
            ("thresholds_passed", String(r.thresholds.filter(\.passed).count)),
            ("thresholds_failed", String(r.thresholds.filter { !$0.passed }.count)),
            ("failed_rules", failed.joined(separator: "; ")),
            ("generator_bound", String(r.generator?.bound ?? false)),
            ("generator_limits", (r.generator?.limits ?? []).joined(separator: "; ")),
        ]
        return csv(["key", "value"], rows.map { [$0.0, $0.1] })
    }

    static func operationsCSV(_ r: RunResult) -> String {
        csv(
            ["operation", "measure", "count", "failures", "rps", "min_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p99_9_ms", "max_ms", "mean_ms"],
            r.operations.map {
                [
                    $0.name, $0.measure, String($0.count), String($0.failures), format($0.rps), format($0.minMs), format($0.p50Ms),
                    format($0.p90Ms), format($0.p95Ms), format($0.p99Ms), format($0.p999Ms), format($0.maxMs), format($0.meanMs),
                ]
            }
        )
    }

    static let usersCSVHeader = ["user", "devices"] + DeliveryLedger.Counts.fields.map(\.name) + ["p50_ms", "p99_ms"]

    /// A row per user, emitted ``RunJSONStream/usersPerPiece`` rows at a time.
    static func writeUsersCSV(_ r: RunResult, rowsPerPiece: Int = RunJSONStream.usersPerPiece, emit: (Data) throws -> Void) throws {
        let fields = DeliveryLedger.Counts.fields
        var piece = usersCSVHeader.map(escape).joined(separator: ",") + "\n"
        for (index, user) in r.users.enumerated() {
            let row = [escape(user.user), String(user.devices)] + fields.map { String(user.counts[keyPath: $0.path]) }
                + [user.p50Ms.map(format) ?? "", user.p99Ms.map(format) ?? ""]
            piece += row.joined(separator: ",")
            piece += "\n"
            if (index + 1) % rowsPerPiece == 0 {
                try emit(Data(piece.utf8))
                piece = ""
            }
        }
        if !piece.isEmpty { try emit(Data(piece.utf8)) }
    }

    static func timeseriesCSV(_ r: RunResult) -> String {
        csv(
            ["second", "devices_ready", "sends", "send_failures", "sends_dropped", "received", "misdelivered", "errors", "delivery_p50_ms", "delivery_p99_ms"],
            r.timeseries.map {
                [
                    String($0.second), String($0.devicesReady), String($0.sends), String($0.sendFailures), String($0.sendsDropped),
                    String($0.received), String($0.misdelivered), String($0.errors), $0.deliveryP50Ms.map(format) ?? "",
                    $0.deliveryP99Ms.map(format) ?? "",
                ]
            }
        )
    }

    static func errorsCSV(_ r: RunResult) -> String {
        csv(
            ["error_class", "count", "first_second", "last_second"],
            r.errors.map { [$0.errorClass, String($0.count), String($0.firstSecond), String($0.lastSecond)] }
        )
    }

    /// One row per incident kept (see docs/reports.md), then one `#` row per outcome whose
    /// rows were cut at the cap, with the count left out.
    static func incidentsCSV(_ r: RunResult) -> String {
        let kept = r.incidents ?? []
        var text = csv(
            ["outcome", "send", "send_kind", "sender", "recipient", "device", "device_user", "platform", "send_start_s", "event_s", "detail", "hop", "reason", "trace_id"],
            kept.map { i in
                [
                    i.outcome, i.send.map(String.init) ?? "", i.sendKind ?? "", i.sender ?? "", i.recipient ?? "", i.device.map(String.init) ?? "",
                    i.deviceUser ?? "", i.platform ?? "", i.sendStartSecond.map(format) ?? "", i.eventSecond.map(format) ?? "", i.detail, i.hop ?? "",
                    i.reason ?? "", r.traceID(of: i) ?? "",
                ]
            }
        )
        for (outcome, total) in (r.incidentTotals ?? [:]).sorted(by: { $0.key < $1.key }) {
            let left = total - kept.filter { $0.outcome == outcome }.count
            if left > 0 { text += "# \(outcome): \(left) more not listed\n" }
        }
        return text
    }

    static func number(_ value: Double?) -> String {
        guard let value else { return "" }
        return value == value.rounded() ? String(Int(value)) : format(value)
    }

    static func format(_ value: Double) -> String {
        String(format: "%.3f", value)
    }

    static func csv(_ header: [String], _ rows: [[String]]) -> String {
        ([header] + rows).map { $0.map(escape).joined(separator: ",") }.joined(separator: "\n") + "\n"
    }

    static func escape(_ field: String) -> String {
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// `junit.xml`: one test case per threshold and per correctness rule, so a CI page shows
/// which one failed and by how much.
public enum JUnitReport {
    public static func render(_ r: RunResult) -> String {
        var cases: [(name: String, failure: String?)] = r.thresholds.map { t in
            let measured = t.measured.map { ReportFiles.format($0) + t.unit } ?? "no data"
            let origin = t.origin == "default" ? " (default gate)" : ""
            return ("\(t.metric): \(t.expression)\(origin)", t.passed ? nil : "\(t.expression)\(origin) failed: measured \(measured)")
        }
        if r.info.aborted { cases.append(("run completed", "aborted: \(r.info.abortReason ?? "stopped")")) }
        if let generator = r.generator {
            cases.append(("the generator kept up", generator.bound ? "inconclusive: " + generator.limits.joined(separator: "; ") : nil))
        }
        let failures = cases.filter { $0.failure != nil }.count
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        xml += "<testsuites name=\"pushfleet\" tests=\"\(cases.count)\" failures=\"\(failures)\">\n"
        xml += "  <testsuite name=\"\(XMLText.escape(r.info.scenario))\" tests=\"\(cases.count)\" failures=\"\(failures)\" time=\"\(ReportFiles.format(r.info.durationSeconds))\">\n"
        for item in cases {
            xml += "    <testcase classname=\"pushfleet.\(XMLText.escape(r.info.scenario))\" name=\"\(XMLText.escape(item.name))\""
            if let failure = item.failure {
                xml += ">\n      <failure message=\"\(XMLText.escape(failure))\"/>\n    </testcase>\n"
            } else {
                xml += "/>\n"
            }
        }
        xml += "  </testsuite>\n</testsuites>\n"
        return xml
    }

}
