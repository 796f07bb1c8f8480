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
    /// `backend`: the spans the embedded reference backend recorded; those of the traces
    /// exported go with them, under its own service.
    static func export(_ result: RunResult, options: TraceOptions, backend: SpanRecorder? = nil) async {
        await export([RunTraces.build(result)], version: result.info.version, to: try? options.configuration(), backend: backend)
    }

    /// Several runs' traces (a capacity search's steps) in one export, so that a collector that
    /// is gone is waited for once.
    static func export(_ runs: [RunTraces.Built?], version: String, to configuration: OTLPConfiguration?, backend: SpanRecorder? = nil) async {
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
        // The backend's spans of the traces the ledger chose, and no others (tail sampling).
        let held = backend?.spans(ofTraces: Set(spans.map(\.identity.traceID)))
        if let held, !held.spans.isEmpty { services.append(ServiceSpans(service: RunTraces.backendService, spans: held.spans)) }
        let report = await OTLPExporter(configuration: configuration).export(services, scope: (name: "pushfleet", version: version))
        let incidents = built.reduce(0) { $0 + $1.incidents }
        let sampled = built.reduce(0) { $0 + $1.sampled }
        let withoutSend = built.reduce(0) { $0 + $1.withoutSend }
        var line = "traces: \(report.exported) spans of \(incidents) incidents and \(sampled) sampled deliveries exported to \(configuration.endpoint)"
        if withoutSend > 0 { line += "; \(withoutSend) incidents name no send and have no trace" }
        if let held, !held.spans.isEmpty || held.overwritten > 0 {
            line += "; \(held.spans.count) of them the reference backend's"
            if held.overwritten > 0 {
                line += " (it keeps its last \(backend?.capacity ?? 0) spans: \(held.overwritten) older ones were overwritten, and early traces may lack them)"
            }
        }
        if report.failed > 0 { line += "; \(report.failed) spans not exported: \(report.failure ?? "")" }
        FileHandleOutput.standardError(line)
    }
}
