import AsyncHTTPClient
import NIOCore
import NIOHTTP1
public import PushFleetCore

/// Posts spans to an OTLP/HTTP endpoint in batches, each its own request: a collector that
/// refuses one batch (too large, overloaded) loses that batch, not the rest, and the count says so.
/// A collector that cannot be reached, or does not answer a batch in full within the timeout, ends
/// the export there: the rest is counted as not exported rather than waited for batch by batch.
public struct OTLPExporter: Sendable {
    public var configuration: OTLPConfiguration
    /// Spans per request (the OpenTelemetry SDKs' default batch size).
    public var batchSize = 512
    /// For one batch, from the request to the last byte of its answer.
    public var timeout: Duration = .seconds(10)

    public init(configuration: OTLPConfiguration) {
        self.configuration = configuration
    }

    public struct Report: Sendable, Equatable {
        public var exported = 0
        public var failed = 0
        /// The first failure, in words.
        public var failure: String?
    }

    private struct Unanswered: Error, CustomStringConvertible {
        var description: String
    }

    public func export(_ services: [ServiceSpans], scope: (name: String, version: String)) async -> Report {
        var report = Report()
        var reachable = true
        for service in services {
            var start = 0
            while start < service.spans.count {
                let batch = Array(service.spans[start..<min(start + batchSize, service.spans.count)])
                start += batch.count
                guard reachable else {
                    report.failed += batch.count
                    continue
                }
                let body = OTLPEncoding.exportRequest([ServiceSpans(service: service.service, spans: batch)], scope: scope)
                do {
                    let (status, answer) = try await post(body)
                    guard (200..<300).contains(status) else {
                        report.failed += batch.count
                        report.failure = report.failure ?? "\(configuration.endpoint) answered \(status) \(answer.prefix(200))"
                        continue
                    }
                    report.exported += batch.count
                } catch {
                    reachable = false
                    report.failed += batch.count
                    report.failure = report.failure ?? "\(configuration.endpoint): \(error)"
                }
            }
        }
        return report
    }

    /// One batch's request and whole answer, or an error once ``timeout`` has passed: a collector
    /// that stalls, or trickles its answer, is not waited for.
    private func post(_ body: [UInt8]) async throws -> (Int, String) {
        let (timeout, configuration) = (timeout, configuration)
        return try await withThrowingTaskGroup(of: (Int, String)?.self) { group in
            group.addTask {
                var request = HTTPClientRequest(url: configuration.endpoint)
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/x-protobuf")
                for (name, value) in configuration.headers { request.headers.add(name: name, value: value) }
                request.body = .bytes(ByteBuffer(bytes: body))
                // The race below decides; the client's own deadline only backs it up.
                let response = try await HTTPClient.shared.execute(request, timeout: .nanoseconds(2 * timeout.nanoseconds))
                let answer = try await response.body.collect(upTo: 64 * 1024)
                return (Int(response.status.code), String(buffer: answer))
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let answered = try await group.next() ?? nil else {
                throw Unanswered(description: "no whole answer within \(DurationText.format(timeout))")
            }
            return answered
        }
    }
}
