import Foundation
import PushFleetCore
import Testing

/// A send's trace id is the same wherever it is worked out (every shard, every rerun of a
/// report) and no two requests of a run share one.
@Suite("Trace identities")
struct TraceIdentityTests {
    @Test("traceparent is well formed, the trace and span ids are its parts, and the same inputs give the same ids")
    func wellFormedAndReproducible() {
        for id in [1, 2, 3, 1_000_000, Int.max] {
            let trace = TraceIdentity.send(run: "r7f3a9c01", id: id)
            #expect(trace.traceparent == String(format: "00-%016llx%016llx-%016llx-01", trace.high, trace.low, trace.span))
            #expect(trace.high != 0 && trace.span != 0, "the W3C format has no all-zero id")
            #expect(trace.traceparent == "00-\(trace.traceID)-\(trace.spanID)-01")
            #expect(trace == TraceIdentity.send(run: "r7f3a9c01", id: id))
        }
        #expect(TraceIdentity(high: 0xAB, low: 1, span: 0x10).traceparent == "00-00000000000000ab0000000000000001-0000000000000010-01")
    }

    @Test("no two sends, device requests or runs share a trace id")
    func distinct() {
        var seen = Set<String>()
        for run in ["r7f3a9c01", "r7f3a9c02"] {
            for id in 1...50_000 { seen.insert(TraceIdentity.send(run: run, id: id).traceID) }
            for device in 0..<100 {
                for request in 1...200 { seen.insert(TraceIdentity.device(run: run, device: device, request: request).traceID) }
            }
        }
        #expect(seen.count == 2 * (50_000 + 100 * 200))
    }

    @Test("a share under 50% never samples a device's own trace, and samples sends near the share")
    func deviceTracesOutOfTheSample() {
        let tracing = Scenario.Tracing(sample: 0.49)
        let root = TraceRoot(run: "r7f3a9c01")
        #expect(!(0..<200).contains { device in (1...50).contains { tracing.samples(root.device(device, request: $0)) } })
        let sampled = (1...20_000).filter { tracing.samples(root.send($0)) }.count
        #expect((9_000...10_600).contains(sampled), "\(sampled)")
    }

    @Test("a trace URL template must name {trace_id} in an http(s) URL")
    func traceURL() {
        #expect(TraceURL.check("http://jaeger:16686/trace/{trace_id}") == nil)
        #expect(TraceURL.check("https://ui.honeycomb.io/t/trace?trace_id={trace_id}") == nil)
        #expect(TraceURL.check("http://jaeger:16686/trace/") != nil)
        #expect(TraceURL.check("javascript:alert({trace_id})") != nil)
        #expect(TraceURL.check("http://x/{trace_id}\" onclick=\"") != nil)
        #expect(TraceURL.link("http://j/trace/{trace_id}", traceID: "ab") == "http://j/trace/ab")
    }
}

@Suite("traceparent read as the W3C rules read it")
struct TraceParentReadingTests {
    @Test("a well-formed header reads back to its ids; anything else is refused")
    func reads() {
        let trace = TraceIdentity.send(run: "r1", id: 42)
        #expect(TraceIdentity(traceparent: trace.traceparent) == trace)
        #expect(TraceIdentity(traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")?.spanID == "b7ad6b7169203331")
        for bad in [
            "", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01", "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
            "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333é-01",
        ] {
            #expect(TraceIdentity(traceparent: bad) == nil, "\(bad)")
        }
    }

    @Test("random headers: read exactly when the grammar says so")
    func randomHeaders() {
        var rng = SplitMix64(seed: 0x7EACE)
        let alphabet = Array("0123456789abcdefABX-")
        var read = 0
        for _ in 0..<20_000 {
            var chars = Array(TraceIdentity.send(run: "r", id: Int(rng.next() % 1000)).traceparent)
            for _ in 0..<Int(rng.next() % 3) { chars[Int(rng.next() % 55)] = alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            let text = String(chars)
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            let hex = { (part: Substring, count: Int) in part.count == count && part.allSatisfy { "0123456789abcdef".contains($0) } }
            let valid = parts.count == 4 && parts[0] == "00" && hex(parts[1], 32) && hex(parts[2], 16) && hex(parts[3], 2)
                && parts[1].contains { $0 != "0" } && parts[2].contains { $0 != "0" }
            #expect((TraceIdentity(traceparent: text) != nil) == valid, "\(text)")
            if valid { read += 1 }
        }
        #expect(read > 1_000)
    }
}
