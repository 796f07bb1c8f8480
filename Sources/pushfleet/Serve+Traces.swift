import ArgumentParser
import Foundation
import PushFleetCore
import PushFleetLauncher
import PushFleetTraces
import ServiceLifecycle

/// `serve`'s span export: the reference backend's and the hub's spans, streamed to a collector
/// while it runs (``SpanStream``). Registered first in the service group, so it is stopped last
/// and its final flush holds what the servers recorded while they drained.
struct SpanExportService: Service {
    var stream: SpanStream

    func run() async throws {
        let totals = await stream.run { interval in
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
                return true
            } catch {
                return false
            }
        }
        FileHandleOutput.standardError(Self.summary(totals, endpoint: stream.exporter.configuration.endpoint))
    }

    static func summary(_ totals: SpanStream.Totals, endpoint: String) -> String {
        var line = "traces: \(totals.exported) spans of the backend and the hub exported to \(endpoint)"
        if totals.overwritten > 0 { line += "; \(totals.overwritten) overwritten before an export reached them" }
        if totals.failed > 0 { line += "; \(totals.failed) not exported: \(totals.failure ?? "")" }
        return line
    }
}

extension Serve {
    /// The collector `--otlp-endpoint` or OpenTelemetry's variables name; nil when none.
    func otlpConfiguration() throws -> OTLPConfiguration? {
        do {
            return try OTLPConfiguration.resolve(flag: otlpEndpoint, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw ValidationError("\(error)")
        }
    }
}
