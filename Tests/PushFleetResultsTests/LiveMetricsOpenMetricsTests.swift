import Foundation
import PushFleetCore
import PushFleetLedger
import PushFleetMetrics
import Testing

/// The live metrics in OpenMetrics text, with the delivery histogram's exemplars.
@Suite("Live metrics as OpenMetrics, with exemplars")
struct LiveMetricsOpenMetricsTests {
    static let run = "run1a2b"

    static func traceID(_ send: Int) -> String { TraceRoot(run: run).send(send).traceID }

    /// Lines of the text that start with `prefix`.
    static func lines(_ text: String, _ prefix: String) -> [Substring] {
        text.split(separator: "\n").filter { $0.hasPrefix(prefix) }
    }

    static func bucket(_ text: String, operation: String, le: String) throws -> Substring {
        try #require(lines(text, "pushfleet_operation_duration_seconds_bucket{operation=\"\(operation)\",le=\"\(le)\"}").first)
    }

    @Test("each bucket's exemplar is the latest push received in it; counters are named without _total; # EOF ends the text")
    func exemplarsOnBuckets() throws {
        let metrics = LiveMetrics()
        metrics.setExemplarSource(.init(run: Self.run, tracing: .init(propagate: true, sample: 1), deadline: .seconds(5)))
        for (send, milliseconds) in [(1, 3), (2, 40), (3, 30)] {
            let nanoseconds = Int64(milliseconds) * 1_000_000
            metrics.recordReceipt(delivery: nanoseconds, hops: nil, send: send, sendStart: 0, at: nanoseconds)
        }
        // A send's own latency names no trace: a sampled send with no delivered pair exports none.
        metrics.record(MetricName.send, nanoseconds: 4_000_000)
        let text = String(decoding: metrics.openMetricsExposition(), as: UTF8.self)

        let first = try Self.bucket(text, operation: "delivery", le: "0.005")
        #expect(first.contains(#" 1 # {trace_id="\#(Self.traceID(1))"} 0.003 "#), "\(first)")
        let latest = try Self.bucket(text, operation: "delivery", le: "0.05")
        #expect(latest.contains(#" # {trace_id="\#(Self.traceID(3))"} 0.03 "#), "the later of two pushes in one bucket: \(latest)")
        #expect(try !Self.bucket(text, operation: "delivery", le: "0.01").contains("#"), "a bucket nothing fell in has no exemplar")
        #expect(Self.lines(text, "pushfleet_operation_duration_seconds_bucket{operation=\"http.send\"").allSatisfy { !$0.contains("#") })
        // The exemplar's timestamp: wall-clock seconds, now.
        let last = try #require(latest.split(separator: " ").last)
        let stamp = try #require(Double(last))
        #expect(abs(stamp - Date().timeIntervalSince1970) < 600)

        #expect(Self.lines(text, "# TYPE pushfleet_sends ") == ["# TYPE pushfleet_sends counter"])
        #expect(Self.lines(text, "# HELP pushfleet_sends ").count == 1)
        #expect(Self.lines(text, "# TYPE pushfleet_sends_total").isEmpty && Self.lines(text, "# HELP pushfleet_sends_total").isEmpty)
        #expect(!Self.lines(text, "pushfleet_sends_total{").isEmpty, "the counter's samples keep _total")
        #expect(Self.lines(text, "# TYPE pushfleet_operation_duration_seconds ") == ["# TYPE pushfleet_operation_duration_seconds histogram"])
        #expect(text.hasSuffix("\n# EOF\n") && Self.lines(text, "# EOF").count == 1)

        // The Prometheus text keeps its own format: no exemplar, no # EOF.
        let prometheus = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(!prometheus.contains("trace_id") && !prometheus.contains("# EOF") && prometheus.contains("# TYPE pushfleet_sends_total counter"))
    }

    @Test("only exported traces are named: a push outside the sample only when late (an incident); none without trace context")
    func onlyExportedTraces() throws {
        let metrics = LiveMetrics()
        metrics.setExemplarSource(.init(run: Self.run, tracing: .init(propagate: true, sample: 0), deadline: .seconds(2)))
        // Received 3 ms after its send started: delivered, not in a sample of 0, so not exported.
        metrics.recordReceipt(delivery: 3_000_000, hops: nil, send: 7, sendStart: 0, at: 3_000_000)
        // Received 2.5 s after its send started: late, an incident, exported.
        metrics.recordReceipt(delivery: 2_600_000_000, hops: nil, send: 8, sendStart: 100_000_000, at: 2_600_000_000)
        let exemplars = try #require(metrics.exemplars[MetricName.delivery])
        #expect(exemplars.compactMap { $0?.traceID } == [Self.traceID(8)])
        let text = String(decoding: metrics.openMetricsExposition(), as: UTF8.self)
        #expect(try Self.bucket(text, operation: "delivery", le: "5.0").contains(#"# {trace_id="\#(Self.traceID(8))"} 2.6 "#))
        #expect(text.components(separatedBy: "trace_id").count == 2)

        // A run whose requests carry no trace context: nothing to name.
        metrics.setExemplarSource(nil)
        metrics.recordReceipt(delivery: 2_600_000_000, hops: nil, send: 8, sendStart: 0, at: 2_600_000_000)
        #expect(metrics.exemplars.isEmpty)
        #expect(!String(decoding: metrics.openMetricsExposition(), as: UTF8.self).contains("trace_id"))
    }

    @Test("a received push's hops are counted live, each bucket naming the push's trace; the backend's hop from the intended start")
    func hops() throws {
        let metrics = LiveMetrics()
        metrics.setExemplarSource(.init(run: Self.run, tracing: .init(propagate: true, sample: 1), deadline: .seconds(5)))
        // Intended at 0, started at 1 ms; accepted at 4 ms, written at 6 ms, received at 30 ms.
        let ms: Int64 = 1_000_000
        let path = DeliveryLedger.PushPath(acceptedAt: 4 * ms, writtenAt: 6 * ms, receivedAt: 30 * ms)
        let hops = DeliveryLedger.HopTimes.of(path, start: 1 * ms, intended: 0, received: 30 * ms, inHand: nil)
        metrics.recordReceipt(delivery: 30 * ms, hops: hops, send: 5, sendStart: 1 * ms, at: 30 * ms)
        let text = String(decoding: metrics.openMetricsExposition(), as: UTF8.self)
        let trace = Self.traceID(5)
        #expect(try Self.bucket(text, operation: "hop.backend", le: "0.005").contains(#"# {trace_id="\#(trace)"} 0.004 "#), "4 ms from the intended start")
        #expect(try Self.bucket(text, operation: "hop.push_service", le: "0.002").contains(#"# {trace_id="\#(trace)"} 0.002 "#))
        #expect(try Self.bucket(text, operation: "hop.device", le: "0.025").contains(#"# {trace_id="\#(trace)"} 0.024 "#))
        #expect(Self.lines(text, "pushfleet_operation_duration_seconds_bucket{operation=\"hop.hub\"").isEmpty, "no hub on this push's path")
        #expect(Self.lines(text, "pushfleet_operation_duration_seconds_count{operation=\"hop.device\"}") == [#"pushfleet_operation_duration_seconds_count{operation="hop.device"} 1"#])
    }

    @Test("OpenMetrics is served to a scraper that lists it with a weight above zero", arguments: [
        ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", true),
        ("Application/OpenMetrics-Text", true),
        ("text/plain;version=0.0.4", false),
        ("*/*", false),
        ("application/openmetrics-text;q=0", false),
        ("application/openmetrics-textual", false),
        // Hostile or broken headers: never a crash, OpenMetrics only when plainly asked for.
        ("", false),
        (";;,,;", false),
        ("application/openmetrics-text;q=abc", true),
        ("application/openmetrics-text;q=-1", false),
        (String(repeating: "text/plain;q=0.1,", count: 2_000) + "application/openmetrics-text", true),
        ("application/openmetrics-text\u{0};q=1", false),
    ])
    func negotiation(accept: String, openMetrics: Bool) {
        #expect(LiveMetrics.wantsOpenMetrics([accept]) == openMetrics)
    }
}
