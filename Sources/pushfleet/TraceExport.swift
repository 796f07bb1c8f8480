import ArgumentParser
import Foundation
import PushFleetCore
import PushFleetLauncher
import PushFleetResults
import PushFleetTraces

/// `--trace-url` and `--otlp-endpoint`, as `run`, `merge`, `shards` and `capacity` take them.
struct TraceOptions: ParsableArguments {
    @Option(help: "Link each incident's trace in the reports: a URL with {trace_id} in it (http://jaeger:16686/trace/{trace_id}).")
    var traceUrl: String?
    @Option(
        help: """
            Export the traces of the run's incidents and sampled deliveries with OTLP/HTTP to this collector (http://HOST:4318); \
            the OTEL_EXPORTER_OTLP_* variables are read when it is not given.
            """
    )
    var otlpEndpoint: String?

    func validate() throws {
        if let traceUrl, let problem = TraceURL.check(traceUrl) { throw ValidationError("--trace-url \(problem)") }
        do { _ = try configuration() } catch { throw ValidationError("\(error)") }
    }

    /// Where traces go; nil when nowhere (checked in ``validate()``).
    func configuration() throws -> OTLPConfiguration? {
        try OTLPConfiguration.resolve(flag: otlpEndpoint, environment: ProcessInfo.processInfo.environment)
    }
}

/// Traces exported once the reports are written. An export that fails is said on stderr and
/// changes no exit code: the reports are the run's record.
enum TraceExport {
    /// `servers`: the spans the embedded reference backend and hub recorded; those of the traces
    /// exported go with them, each under its own service.
    static func export(_ result: RunResult, options: TraceOptions, servers: ServerSpans? = nil) async {
        await export([RunTraces.build(result)], version: result.info.version, to: try? options.configuration(), servers: servers)
    }

    /// Several runs' traces (a capacity search's steps) in one export, so that a collector that
    /// is gone is waited for once.
    static func export(_ runs: [RunTraces.Built?], version: String, to configuration: OTLPConfiguration?, servers: ServerSpans? = nil) async {
        guard let configuration, !runs.isEmpty else { return }
        let built = runs.compactMap { $0 }
        guard !built.isEmpty else {
            FileHandleOutput.standardError("traces: none exported: the run's requests carried no trace context (tracing.propagate: false)")
            return
        }
        let spans = built.flatMap(\.spans)
        guard !spans.isEmpty else {
            FileHandleOutput.standardError("traces: no incident and no sampled delivery to export")
            return
        }
        var services = [ServiceSpans(service: RunTraces.service, spans: spans)]
        let pushService = built.flatMap(\.pushServiceSpans)
        if !pushService.isEmpty { services.append(ServiceSpans(service: RunTraces.pushService, spans: pushService)) }
        // The servers' spans of the traces the ledger chose, and no others (tail sampling).
        let traces = Set(spans.map(\.identity.traceID))
        let held = (servers?.all ?? []).map { ($0, $0.spans(ofTraces: traces)) }
        for (recorder, kept) in held where !kept.spans.isEmpty { services.append(ServiceSpans(service: recorder.service, spans: kept.spans)) }
        let report = await OTLPExporter(configuration: configuration).export(services, scope: (name: "pushfleet", version: version))
        let incidents = built.reduce(0) { $0 + $1.incidents }
        let sampled = built.reduce(0) { $0 + $1.sampled }
        let withoutSend = built.reduce(0) { $0 + $1.withoutSend }
        var line = "traces: \(report.exported) spans of \(incidents) incidents and \(sampled) sampled deliveries exported to \(configuration.endpoint)"
        if withoutSend > 0 { line += "; \(withoutSend) incidents name no send and have no trace" }
        for (recorder, kept) in held where !kept.spans.isEmpty || kept.overwritten > 0 {
            line += "; \(kept.spans.count) of them \(recorder.service)'s"
            if kept.overwritten > 0 {
                line += " (it keeps its last \(recorder.capacity) spans: \(kept.overwritten) older ones were overwritten, and early traces may lack them)"
            }
        }
        if report.failed > 0 { line += "; \(report.failed) spans not exported: \(report.failure ?? "")" }
        FileHandleOutput.standardError(line)
    }
}
