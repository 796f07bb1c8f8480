import Foundation
import PushFleetCore
import PushFleetLedger
import PushFleetResults
import Testing

@testable import PushFleetTraces

/// Where traces go (OpenTelemetry's variables, as its SDKs read them) and what the run's
/// incidents become; CI decodes the bytes with the OpenTelemetry project's own classes
/// (.ci/interop-otlp).
@Suite("OTLP export")
struct OTLPTests {
    @Test("the endpoint: the flag, else the traces variable as given, else the shared one with /v1/traces; none is off")
    func endpoint() throws {
        #expect(try OTLPConfiguration.resolve(flag: nil, environment: [:]) == nil)
        #expect(try OTLPConfiguration.resolve(flag: "http://c:4318", environment: [:])?.endpoint == "http://c:4318/v1/traces")
        #expect(try OTLPConfiguration.resolve(flag: "http://c:4318/v1/traces", environment: [:])?.endpoint == "http://c:4318/v1/traces")
        let both = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://shared:4318/", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces:443/custom"]
        #expect(try OTLPConfiguration.resolve(flag: nil, environment: both)?.endpoint == "https://traces:443/custom")
        #expect(try OTLPConfiguration.resolve(flag: nil, environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://shared:4318/"])?.endpoint == "http://shared:4318/v1/traces")
        #expect(try OTLPConfiguration.resolve(flag: "http://flag:1", environment: both)?.endpoint == "http://flag:1/v1/traces")
        for bad in ["collector:4318", "ftp://c/", "http://", "://x"] {
            #expect(throws: OTLPConfiguration.Problem.self) { try OTLPConfiguration.resolve(flag: bad, environment: [:]) }
        }
    }

    @Test("headers: key=value pairs, percent-decoded, the traces variable first; a malformed pair is refused, not skipped")
    func headers() throws {
        let environment = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x-tenant = t1 ,"]
        let headers = try #require(try OTLPConfiguration.resolve(flag: nil, environment: environment)).headers
        #expect(headers.map(\.0) == ["api-key", "x-tenant"] && headers.map(\.1) == ["a b", "t1"])
        var traces = environment
        traces["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] = "only=this"
        #expect(try #require(try OTLPConfiguration.resolve(flag: nil, environment: traces)).headers.map(\.0) == ["only"])
        for bad in ["novalue", "bad name=1", "=v", "k=%0A"] {
            var broken = environment
            broken["OTEL_EXPORTER_OTLP_HEADERS"] = bad
            #expect(throws: OTLPConfiguration.Problem.self, "\(bad)") { try OTLPConfiguration.resolve(flag: nil, environment: broken) }
        }
    }

    @Test("protobuf's wire format as its documentation spells it: varints, fixed64, length-delimited fields")
    func wireFormat() {
        var writer = ProtoWriter()
        writer.varintField(1, 150)
        #expect(writer.bytes == [0x08, 0x96, 0x01])
        writer = ProtoWriter()
        writer.string(2, "testing")
        #expect(writer.bytes == [0x12, 0x07] + Array("testing".utf8))
        writer = ProtoWriter()
        writer.fixed64(7, 1)
        #expect(writer.bytes == [0x39, 1, 0, 0, 0, 0, 0, 0, 0])
        writer = ProtoWriter()
        writer.varintField(3, UInt64(bitPattern: -1))
        #expect(writer.bytes == [0x18] + Array(repeating: 0xFF, count: 9) + [0x01])
        #expect(ProtoWriter.traceID(TraceIdentity(high: 0x0102, low: 0xFF, span: 1)) == [0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0xFF])
    }

    static func result(incidents: [RunResult.Incident], traceContext: Bool? = true) throws -> RunResult {
        var info = RunResult.Info(
            tool: "pushfleet", version: "test", runID: "r0a1b2c3d4e5", scenario: "s", scenarioFile: "s.yaml", scenarioText: "", seed: 1,
            target: "embedded", backendURL: "", pushServiceURL: "", host: "h", cores: 2, memoryBytes: 1, os: "linux",
            startedAt: "2026-11-30T00:00:00.250Z", endedAt: "2026-11-30T00:01:00.000Z", durationSeconds: 60, aborted: false,
            trafficStartSecond: 1, trafficEndSecond: 50
        )
        info.traceContext = traceContext
        return RunResult(
            info: info, devices: .init(planned: 1, ready: 1, failed: 0, byPlatform: [:]), operations: [], histograms: [:], delivery: .init(),
            deliveryByPlatform: [:], counters: [:], users: [], timeseries: [], errors: [], thresholds: [], markers: [], incidents: incidents
        )
    }

    @Test("each incident's send a root span under its trace id, each incident a failed child of it; sends named twice made once")
    func incidentSpans() throws {
        let incidents = [
            RunResult.Incident(outcome: "lost", send: 7, sendKind: "secure", device: 3, sendStartSecond: 2.5, sendEndSecond: 2.504, detail: "", hop: "push_service", reason: "dropped"),
            RunResult.Incident(outcome: "late", send: 7, device: 4, sendStartSecond: 2.5, sendEndSecond: 2.504, eventSecond: 9.0, detail: "after 6500 ms"),
            RunResult.Incident(outcome: "leak", detail: "read another user's notification"),
        ]
        let built = try #require(RunTraces.build(try Self.result(incidents: incidents)))
        #expect(built.withoutSend == 1)
        let trace = TraceIdentity.send(run: "r0a1b2c3d4e5", id: 7)
        let roots = built.spans.filter { $0.name == "send" }
        #expect(roots.count == 1 && roots[0].identity == trace && roots[0].parent == nil && roots[0].kind == .client)
        // 2026-11-30T00:00:00.250Z is 1,795,996,800,250,000,000 ns after the epoch.
        #expect(roots[0].start == 1_795_996_802_750_000_000 && roots[0].end == 1_795_996_802_754_000_000)
        let pairs = built.spans.filter { $0.name.hasPrefix("pair ") }
        #expect(pairs.map(\.name) == ["pair lost", "pair late"])
        #expect(pairs.allSatisfy { $0.parent == trace.span && $0.identity.traceID == trace.traceID && $0.identity.span != trace.span })
        #expect(pairs[0].status == .error("lost: push_service: dropped"))
        #expect(pairs[1].start == 1_795_996_802_750_000_000 && pairs[1].end == 1_795_996_809_250_000_000)
        #expect(RunTraces.build(try Self.result(incidents: incidents, traceContext: false)) == nil)
    }

    @Test("a sampled delivery: an ok pair under its send, its hops one after another from the send's start to the content in hand")
    func sampledSpans() throws {
        var result = try Self.result(incidents: [])
        result.sampledDeliveries = [
            SampledDelivery(
                send: 9, device: 2, platform: "apns", sendStartSecond: 1, sendEndSecond: 1.003, receivedSecond: 1.01, backendNs: 4_000_000,
                pushServiceNs: 1_000_000, deviceNs: 5_000_000, fetchNs: 2_000_000
            )
        ]
        let built = try #require(RunTraces.build(result))
        #expect(built.sampled == 1 && built.incidents == 0)
        let trace = TraceIdentity.send(run: "r0a1b2c3d4e5", id: 9)
        let pair = try #require(built.spans.first { $0.name == "pair delivered" })
        #expect(pair.parent == trace.span && pair.status == .ok && pair.identity.traceID == trace.traceID)
        let hops = built.spans.filter { $0.parent == pair.identity.span }
        #expect(hops.map(\.name) == ["hop backend", "hop push_service", "hop device", "hop fetch"])
        let origin: UInt64 = 1_795_996_800_250_000_000 + 1_000_000_000
        #expect(hops.first?.start == origin && hops.last?.end == pair.end && pair.end == origin + 12_000_000)
        #expect(zip(hops, hops.dropFirst()).allSatisfy { $0.end == $1.start })
    }

    @Test("a sampled push's own path: the push service's span under the provider request its traceparent named, the receipt under it, the fetch with the id the device's request carried; a push without the send's context is linked, never parented")
    func pushPath() throws {
        var result = try Self.result(incidents: [])
        let sample = SampledDelivery(
            send: 9, device: 2, platform: "apns", sendStartSecond: 1, sendEndSecond: 1.003, receivedSecond: 1.01, backendNs: 4_000_000,
            pushServiceNs: 1_000_000, deviceNs: 5_000_000, fetchNs: 2_000_000, pushSpan: "00000000000abc12"
        )
        var untraced = sample
        untraced.send = 10
        untraced.pushSpan = nil
        untraced.pushUntraced = true
        result.sampledDeliveries = [sample, untraced]
        let built = try #require(RunTraces.build(result))
        let trace = TraceIdentity.send(run: "r0a1b2c3d4e5", id: 9)
        let origin: UInt64 = 1_795_996_800_250_000_000 + 1_000_000_000
        let push = try #require(built.pushServiceSpans.first { $0.identity.traceID == trace.traceID })
        #expect(push.parent == 0xabc12 && push.kind == .server && push.name == "push accepted")
        #expect(push.start == origin + 4_000_000 && push.end == origin + 5_000_000)
        let receipt = try #require(built.spans.first { $0.parent == push.identity.span })
        #expect(receipt.name == "push received" && receipt.start == push.end && receipt.end == origin + 10_000_000)
        let fetch = try #require(built.spans.first { $0.parent == receipt.identity.span })
        // The device's fetch request carried the provider request's context's child for its
        // device number (VirtualDevice.receive): the backend's span of the fetch joins this one.
        #expect(fetch.identity == TraceIdentity(high: trace.high, low: trace.low, span: 0xabc12).child(2))
        #expect(fetch.name == "fetch" && fetch.end == origin + 12_000_000)

        let other = TraceIdentity.send(run: "r0a1b2c3d4e5", id: 10)
        let linked = try #require(built.pushServiceSpans.first { $0.identity.traceID != trace.traceID })
        #expect(linked.parent == nil && linked.identity.traceID != other.traceID)
        #expect(linked.links.map(\.target) == [other])
        #expect(!built.spans.contains { $0.name == "fetch" && $0.identity.traceID == linked.identity.traceID })
        #expect(built.pushServiceSpans.count == 2 && Set(built.pushServiceSpans.map(\.identity.span)).count == 2)
    }
    @Test("a lost or late pair's push as the push service reported it: refused or dropped under the provider request's span, with its step and times; a push without the send's context linked, never parented")
    func incidentPushSpans() throws {
        var refused = RunResult.Incident(
            outcome: "lost", send: 7, device: 3, platform: "apns", sendStartSecond: 2.5, sendEndSecond: 2.504, detail: "", hop: "push_service",
            reason: "refused apns 410 Unregistered"
        )
        refused.pushStep = "refused"
        refused.pushSecond = 2.502
        refused.pushStepSecond = 2.502
        refused.pushSpan = "00000000000abc12"
        var dropped = RunResult.Incident(
            outcome: "lost", send: 8, device: 4, sendStartSecond: 3, sendEndSecond: 3.004, detail: "", hop: "push_service", reason: "dropped"
        )
        dropped.pushStep = "dropped"
        dropped.pushSecond = 3.001
        dropped.pushStepSecond = 3.003
        dropped.pushUntraced = true
        var late = RunResult.Incident(outcome: "late", send: 9, device: 5, sendStartSecond: 4, sendEndSecond: 4.004, eventSecond: 11, detail: "", hop: "push_service")
        late.pushStep = "written"
        late.pushSecond = 4.002
        late.pushStepSecond = 10.9
        late.pushSpan = "0000000000000077"
        let neverPushed = RunResult.Incident(outcome: "lost", send: 10, device: 6, sendStartSecond: 5, detail: "", hop: "backend", reason: "not_pushed")
        let built = try #require(RunTraces.build(try Self.result(incidents: [refused, dropped, late, neverPushed])))
        #expect(built.pushServiceSpans.count == 3, "none for a push the backend never made")
        let origin: UInt64 = 1_795_996_800_250_000_000

        let seven = TraceIdentity.send(run: "r0a1b2c3d4e5", id: 7)
        let first = try #require(built.pushServiceSpans.first { $0.identity.traceID == seven.traceID })
        #expect(first.name == "push refused" && first.parent == 0xabc12 && first.kind == .server && first.links.isEmpty)
        #expect(first.start == origin + 2_502_000_000 && first.end == first.start)
        #expect(first.status == .error("refused: refused apns 410 Unregistered"))
        #expect(first.attributes.contains { $0.0 == "pushfleet.push.step" && $0.1 == .string("refused") })

        let eight = TraceIdentity.send(run: "r0a1b2c3d4e5", id: 8)
        let linked = try #require(built.pushServiceSpans.first { $0.name == "push dropped" })
        #expect(linked.parent == nil && linked.identity.traceID != eight.traceID && linked.links.map(\.target) == [eight])
        #expect(linked.start == origin + 3_001_000_000 && linked.end == origin + 3_003_000_000)

        let nine = TraceIdentity.send(run: "r0a1b2c3d4e5", id: 9)
        let accepted = try #require(built.pushServiceSpans.first { $0.identity.traceID == nine.traceID })
        #expect(accepted.name == "push accepted" && accepted.parent == 0x77 && accepted.status == .ok)
        #expect(accepted.end == origin + 10_900_000_000)
        #expect(Set(built.pushServiceSpans.map(\.identity.span)).count == 3)
    }
}
