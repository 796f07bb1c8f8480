import Foundation
import Hummingbird
import Logging
import NIOCore
import PushFleetCore
import PushFleetServerSupport
import PushFleetTestSupport
import Synchronization
import Testing

@testable import PushFleetTraces

/// A collector that refuses, stalls or trickles cannot hold the tool: a refused batch is counted
/// and the rest still go; a batch not answered in full within the timeout ends the export, the
/// rest counted as not exported.
@Suite("OTLP export to hostile collectors", .timeLimit(.minutes(5)))
struct OTLPExporterTests {
    enum Behaviour: String { case refuse, stall, trickle, accept }

    /// A collector on a loopback port that behaves as told, counting the batches it was sent.
    static func withCollector(_ behaviour: Behaviour, _ body: @escaping @Sendable (String, @escaping @Sendable () -> Int) async throws -> Void) async throws {
        let posts = Mutex(0)
        let router = Router()
        router.post("/v1/traces") { request, _ -> Response in
            posts.withLock { $0 += 1 }
            switch behaviour {
            case .refuse: return Response(status: .internalServerError, body: .init(byteBuffer: ByteBuffer(string: "overloaded")))
            case .stall:
                try? await Task.sleep(for: .seconds(60))
                return Response(status: .ok)
            case .trickle:
                return Response(status: .ok, body: ResponseBody { writer in
                    for _ in 0..<60 {
                        try await writer.write(ByteBuffer(string: "x"))
                        try await Task.sleep(for: .milliseconds(500))
                    }
                    try await writer.finish(nil)
                })
            case .accept: return Response(status: .ok)
            }
        }
        var logger = Logger(label: "collector")
        logger.logLevel = .critical
        let bound = Readiness<ListenAddress>()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { bound.succeed(ListenAddress(host: "127.0.0.1", port: $0.localAddress?.port ?? 0)) }, logger: logger
        )
        try await withServices([app], logger: logger, shutdownWithin: .seconds(1)) {
            try await body(try await bound.value().httpURL, { posts.withLock { $0 } })
        }
    }

    static func spans(_ count: Int) -> [ServiceSpans] {
        let trace = TraceIdentity.send(run: "rhostile01", id: 1)
        return [ServiceSpans(service: "pushfleet", spans: (0..<count).map { TraceSpan(identity: trace.child(UInt64($0)), parent: trace.span, name: "s", kind: .internal, start: 1, end: 2) })]
    }

    /// A short timeout only where the collector never answers in time anyway; elsewhere one a
    /// loaded machine cannot miss (the suite starts many servers at once).
    static func exporter(_ url: String, timeout: Duration = .seconds(60)) throws -> OTLPExporter {
        var exporter = OTLPExporter(configuration: try #require(try OTLPConfiguration.resolve(flag: url, environment: [:])))
        exporter.batchSize = 2
        exporter.timeout = timeout
        return exporter
    }

    @Test("a collector that refuses every batch: each is counted, none stops the others, the reason is kept")
    func refusing() async throws {
        try await Self.withCollector(.refuse) { url, posts in
            let report = try await Self.exporter(url).export(Self.spans(6), scope: ("pushfleet", "test"))
            #expect(report.exported == 0 && report.failed == 6 && posts() == 3, "\(report)")
            #expect(report.failure?.contains("answered 500 overloaded") == true, "\(report)")
        }
    }

    @Test("a collector that never answers, or trickles its answer: one batch waited for, the rest not sent")
    func stallingAndTrickling() async throws {
        for behaviour in [Behaviour.stall, .trickle] {
            try await Self.withCollector(behaviour) { url, posts in
                // One batch sent: the export stopped there rather than waiting batch after batch.
                let report = try await Self.exporter(url, timeout: .seconds(5)).export(Self.spans(6), scope: ("pushfleet", "test"))
                #expect(report.exported == 0 && report.failed == 6, "\(behaviour): \(report)")
                #expect(report.failure?.contains("no whole answer within 5s") == true, "\(behaviour): \(report)")
                // A loaded machine may reach the handler late, or not before the exporter gave up
                // on its connection: wait for the one batch, then long enough for a second to show.
                try await eventually(within: .seconds(90)) { posts() >= 1 }
                try await Task.sleep(for: .seconds(1))
                #expect(posts() <= 1, "\(behaviour): \(report)")
            }
        }
    }

    @Test("nothing listening: the first batch's failure ends the export")
    func unreachable() async throws {
        // The client retries a refused connection until the deadline: a short one, as nothing answers.
        let report = try await Self.exporter("http://127.0.0.1:9", timeout: .seconds(3)).export(Self.spans(6), scope: ("pushfleet", "test"))
        #expect(report.exported == 0 && report.failed == 6 && report.failure != nil, "\(report)")
    }

    @Test("a collector that takes every batch: all exported")
    func accepting() async throws {
        try await Self.withCollector(.accept) { url, posts in
            let report = try await Self.exporter(url).export(Self.spans(5), scope: ("pushfleet", "test"))
            #expect(report == .init(exported: 5, failed: 0, failure: nil) && posts() == 3, "\(report)")
        }
    }

    @Test("a server's span stream: each drain exports every recorder's spans under its own service; what a ring overwrote between drains, and the last moments' spans at the stop, are accounted")
    func streaming() async throws {
        try await Self.withCollector(.accept) { url, posts in
            let recorders = [SpanRecorder(service: TraceService.backend, capacity: 2), SpanRecorder(service: TraceService.hub, capacity: 10)]
            let trace = TraceIdentity.send(run: "rstream01", id: 1)
            let salts = Atomic<UInt64>(0)
            @Sendable func record(_ count: Int, in recorder: SpanRecorder) {
                for _ in 0..<count {
                    let salt = salts.add(1, ordering: .relaxed).newValue
                    recorder.record(TraceSpan(identity: trace.child(salt), parent: trace.span, name: "s", kind: .server, start: 1, end: 2))
                }
            }
            let waits = Atomic<Int>(0)
            let stream = SpanStream(recorders: recorders, exporter: try Self.exporter(url), interval: .milliseconds(1), scope: ("pushfleet", "test"))
            let totals = await stream.run { _ in
                switch waits.add(1, ordering: .relaxed).newValue {
                case 1:
                    record(3, in: recorders[0])  // one overwritten before the first drain
                    record(1, in: recorders[1])
                    return true
                case 2:
                    return true  // nothing recorded: nothing posted
                default:
                    record(2, in: recorders[1])  // recorded as the server stops: the last flush takes them
                    return false
                }
            }
            // Batches of two, per service: the backend's 2 and the hub's 1, then the hub's 2.
            #expect(totals == .init(exported: 5, overwritten: 1, failed: 0, failure: nil), "\(totals)")
            #expect(posts() == 3 && recorders.allSatisfy { $0.drain().spans.isEmpty })
        }
        let unreachable = SpanStream(
            recorders: [SpanRecorder(service: TraceService.backend)], exporter: try Self.exporter("http://127.0.0.1:9", timeout: .seconds(3)),
            scope: ("pushfleet", "test")
        )
        unreachable.recorders[0].record(TraceSpan(identity: TraceIdentity.send(run: "rstream01", id: 2), parent: nil, name: "s", kind: .server, start: 1, end: 2))
        let lost = await unreachable.run { _ in false }
        #expect(lost.exported == 0 && lost.failed == 1 && lost.failure != nil, "\(lost)")
    }
}
