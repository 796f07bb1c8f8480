import Foundation
import HTTPTypes
import Logging
import NIOHTTP1
import PushFleetHub
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetCore
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetWire
import Testing

@testable import PushFleetBackend

/// The reference backend hands the trace context a send came with to the push service, with
/// every push the send makes, as an instrumented backend's HTTP client does.
@Suite("Trace context through the reference backend")
struct TracePropagationTests {
    @Test("a send's traceparent and tracestate reach the push service on its push; a send without one, or with a malformed one, carries none")
    func forwarded() async throws {
        try await Self.withBackend(BackendConfiguration()) { calls, proxy, device in
            let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            let sends: [[(String, String)]] = [
                [("traceparent", parent), ("tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")],
                [],
                [("traceparent", "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01")],
                [("traceparent", "00-00000000000000000000000000000000-b7ad6b7169203331-01")],
            ]
            for headers in sends {
                let answer = try await TestHTTP.request(
                    .POST, "\(calls.backend)/api/notifications?pns=apns&to_tag=alice", auth: .user("bob"), body: Data("\"hi\"".utf8),
                    headers: headers + [("Content-Type", "application/json")]
                )
                #expect(answer.status == 200, "\(answer)")
            }
            let pushes = proxy.requests.filter { $0.path.hasPrefix("/3/device/") }
            try #require(pushes.count == 4, "\(proxy.requests.map(\.path))")
            #expect(pushes[0].headers["traceparent"] == parent)
            #expect(pushes[0].headers["tracestate"] == "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7")
            for push in pushes.dropFirst() {
                #expect(push.headers["traceparent"] == nil && push.headers["tracestate"] == nil, "\(push.headers)")
            }
            // The push service hands the context to the device with the push, and only a well-formed one.
            let frames = try await device.waitForPushes(4)
            #expect(frames.map(\.trace) == [parent, nil, nil, nil], "\(frames.map(\.trace))")
        }
    }

    /// A reference backend configured so, sending through a proxy that records its requests to
    /// the push service, and a device of alice's connected and registered.
    static func withBackend(
        _ configuration: BackendConfiguration, _ body: @escaping @Sendable (TestSystem, RecordingProxy, TestDevice) async throws -> Void
    ) async throws {
        try await TestSystem.run { system in
            var logger = Logger(label: "trace-propagation")
            logger.logLevel = .critical
            let proxy = RecordingProxy(upstream: system.pushService)
            let backend = ReferenceBackend(configuration: configuration, pushServiceURL: { try await proxy.bound.value().httpURL })
            try await withServices([proxy.makeService(logger: logger), backend.makeService(logger: logger)], logger: logger) {
                let calls = TestSystem(backend: try await backend.bound.value().httpURL, pushService: system.pushService)
                let device = try await calls.device("alice", .apns)
                defer { device.close() }
                try await body(calls, proxy, device)
            }
        }
    }

    @Test("a backend recording spans: a server span under the caller's, its store calls and a client span per push under that, each push carrying its client span's id; an unsampled caller, or none, records nothing")
    func recordsItsSpans() async throws {
        let spans = SpanRecorder(service: TraceService.backend, capacity: 100)
        var configuration = BackendConfiguration()
        configuration.spans = spans
        try await Self.withBackend(configuration) { calls, proxy, device in
            let caller = TraceIdentity.send(run: "rspans001", id: 4)
            let unsampled = String(TraceIdentity.send(run: "rspans001", id: 5).traceparent.dropLast(2)) + "00"
            let hostile = [caller.traceparent.uppercased(), "00-00000000000000000000000000000000-b7ad6b7169203331-01", String(repeating: "a", count: 8_000)]
            for headers in [[("traceparent", caller.traceparent)], [("traceparent", unsampled)], []] + hostile.map({ [("traceparent", $0)] }) {
                let answer = try await TestHTTP.request(
                    .POST, "\(calls.backend)/api/notifications/secure?to_tag=alice", auth: .user("bob"), body: Data("\"hi\"".utf8),
                    headers: headers + [("Content-Type", "application/json")]
                )
                #expect(answer.status == 200, "\(answer)")
            }
            let recorded = spans.spans(ofTraces: [caller.traceID]).spans
            let server = try #require(recorded.first { $0.kind == .server }, "\(recorded.map(\.name))")
            #expect(server.parent == caller.span && server.name == "POST" && server.identity.traceID == caller.traceID)
            #expect(server.attributes.contains { $0.0 == "url.path" && $0.1 == .string("/api/notifications/secure") })
            #expect(server.attributes.contains { $0.0 == "http.response.status_code" && $0.1 == .int(200) })
            let children = recorded.filter { $0.parent == server.identity.span }
            #expect(Set(children.map(\.name)) == ["store read", "store write", "POST"], "\(children.map(\.name))")
            let client = try #require(children.first { $0.kind == .client })
            #expect(client.start >= server.start && client.end <= server.end)
            #expect(client.attributes.contains { $0.0 == "http.response.status_code" && $0.1 == .int(200) })
            // The push went out under the client span's id, and the device was handed it.
            let pushes = proxy.requests.filter { $0.path.hasPrefix("/3/device/") }
            try #require(pushes.count == 6, "\(proxy.requests.map(\.path))")
            #expect(pushes[0].headers["traceparent"] == client.identity.traceparent)
            #expect(pushes[1].headers["traceparent"] == unsampled && pushes[2...].allSatisfy { $0.headers["traceparent"] == nil })
            let frames = try await device.waitForPushes(6)
            #expect(frames.first?.trace == client.identity.traceparent)
            // Only the sampled send recorded: its server span and the spans under it; a hostile
            // traceparent records nothing (and the uppercase copy of the caller's is not its trace).
            #expect(recorded.count == 1 + children.count)
            #expect(spans.spans(ofTraces: [caller.traceID]).spans.count == recorded.count)
            #expect(spans.spans(ofTraces: [TraceIdentity.send(run: "rspans001", id: 5).traceID]).spans.isEmpty)
        }
    }

    @Test("the span recorder keeps its last spans, gives a trace's in order and counts what it overwrote")
    func recorderIsBounded() {
        let spans = SpanRecorder(service: "test", capacity: 3)
        let traces = (0..<5).map { TraceIdentity.send(run: "rring0001", id: $0) }
        for (number, trace) in traces.enumerated() {
            spans.record(TraceSpan(identity: trace, parent: nil, name: "s\(number)", kind: .server, start: UInt64(number), end: UInt64(number)))
        }
        let held = spans.spans(ofTraces: Set(traces.map(\.traceID)))
        #expect(held.spans.map(\.name) == ["s2", "s3", "s4"] && held.overwritten == 2)
        #expect(spans.spans(ofTraces: [traces[0].traceID, traces[3].traceID]).spans.map(\.name) == ["s3"])
        #expect(spans.nextSalt() != spans.nextSalt())
        // The sample's traces are kept apart from the ring, up to their own bound.
        let keeping = SpanRecorder(service: "test", capacity: 2, keeping: { $0 == traces[0] || $0 == traces[1] }, keptCapacity: 1)
        for (number, trace) in traces.enumerated() {
            keeping.record(TraceSpan(identity: trace, parent: nil, name: "s\(number)", kind: .server, start: UInt64(number), end: UInt64(number)))
        }
        #expect(keeping.spans(ofTraces: Set(traces.map(\.traceID))).spans.map(\.name) == ["s0", "s3", "s4"])
    }

    @Test("a drained recorder hands over every span it held, oldest first, with what it overwrote since the last drain, and is empty after")
    func recorderDrains() {
        let spans = SpanRecorder(service: "test", capacity: 3)
        let trace = TraceIdentity.send(run: "rdrain001", id: 1)
        func record(_ range: Range<Int>) {
            for number in range {
                spans.record(TraceSpan(identity: trace.child(UInt64(number)), parent: trace.span, name: "s\(number)", kind: .server, start: 1, end: 2))
            }
        }
        record(0..<5)
        let first = spans.drain()
        #expect(first.spans.map(\.name) == ["s2", "s3", "s4"] && first.overwritten == 2)
        #expect(spans.drain().spans.isEmpty && spans.spans(ofTraces: [trace.traceID]).spans.isEmpty)
        record(5..<7)
        let second = spans.drain()
        #expect(second.spans.map(\.name) == ["s5", "s6"] && second.overwritten == 0)
    }

    @Test("a send through the notification hub hands its traceparent on with each push it makes, to the device")
    func throughTheHub() async throws {
        let settings = NotificationHub.Settings(namespace: "traced", hubName: "hub")
        try await TestSystem.run(.withHub(settings)) { system in
            let sdk = DotNetHubWire(base: system.pushService, settings: settings)
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .apns)
            defer { device.close() }
            _ = try await HubFanOutTests.register(sdk, device, tags: ["traced"])
            let parent = TraceIdentity.send(run: "rhub0001", id: 7).traceparent
            for headers in [[("traceparent", parent)], []] {
                let response = try await sdk.request(
                    .POST, "messages", body: Data(#"{"aps":{"alert":"hi"}}"#.utf8),
                    headers: [("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", "traced")] + headers
                )
                #expect(response.status == 201, "\(response.text)")
            }
            let frames = try await device.waitForPushes(2)
            #expect(Set(frames.map(\.trace)) == [parent, nil], "\(frames.map(\.trace))")
        }
    }

    @Test("a hub recording spans: a server span under the sampled caller's, a client span per push under it whose id the push carries to the device; an unsampled caller's or a hostile context records nothing and passes on as it came")
    func hubRecordsItsSpans() async throws {
        let spans = SpanRecorder(service: TraceService.hub, capacity: 100)
        let settings = NotificationHub.Settings(namespace: "traced", hubName: "hub")
        var configuration = EmbeddedSystem.Configuration.withHub(settings)
        configuration.pushServer.hubSpans = spans
        try await TestSystem.run(configuration) { system in
            let sdk = DotNetHubWire(base: system.pushService, settings: settings)
            var devices: [TestDevice] = []
            defer { devices.forEach { $0.close() } }
            for platform in [Platform.apns, .apns] {
                let device = try await TestDevice.connect(pushService: system.pushService, platform: platform)
                devices.append(device)
                _ = try await HubFanOutTests.register(sdk, device, tags: ["traced"])
            }
            let caller = TraceIdentity.send(run: "rhubspan1", id: 3)
            let unsampled = String(TraceIdentity.send(run: "rhubspan1", id: 4).traceparent.dropLast(2)) + "00"
            for parent in [caller.traceparent, unsampled, caller.traceparent.uppercased()] {
                let response = try await sdk.request(
                    .POST, "messages", body: Data(#"{"aps":{"alert":"hi"}}"#.utf8),
                    headers: [("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", "traced"), ("traceparent", parent)]
                )
                #expect(response.status == 201, "\(response.text)")
            }
            let recorded = spans.spans(ofTraces: [caller.traceID]).spans
            let server = try #require(recorded.first { $0.kind == .server }, "\(recorded.map(\.name))")
            #expect(server.parent == caller.span && server.identity.traceID == caller.traceID && server.name == "POST")
            #expect(server.attributes.contains { $0.0 == "url.path" && $0.1 == .string("/hub/messages") })
            #expect(server.attributes.contains { $0.0 == "http.response.status_code" && $0.1 == .int(201) })
            #expect(server.attributes.contains { $0.0 == "pushfleet.hub.targets" && $0.1 == .int(2) })
            let clients = recorded.filter { $0.kind == .client }
            #expect(clients.count == 2 && clients.allSatisfy { $0.parent == server.identity.span && $0.status == .unset }, "\(clients)")
            #expect(clients.allSatisfy { $0.attributes.contains { $0.0 == "pushfleet.platform" && $0.1 == .string("apple") } }, "\(clients)")
            let lookups = recorded.filter { $0.name == "store read" }
            #expect(lookups.count == 1 && lookups.allSatisfy { $0.parent == server.identity.span && $0.kind == .internal }, "\(recorded.map(\.name))")
            #expect(recorded.count == 4 && spans.drain().spans.count == 4, "only the sampled send records")
            // Each device got its push under its own client span; the others as they came, or none.
            for device in devices {
                let frames = try await device.waitForPushes(3)
                let traced = frames.compactMap(\.trace)
                #expect(traced.count == 2 && traced.contains(unsampled), "\(traced)")
                #expect(clients.contains { $0.identity.traceparent == traced.first { $0 != unsampled } }, "\(traced)")
            }
        }
    }

    @Test("the push service keeps only a well-formed traceparent a provider request brings; a hostile one reaches no device")
    func pushServiceReadsStrictly() async throws {
        try await TestSystem.run { system in
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .apns)
            defer { device.close() }
            let token = try #require(device.address?.token)
            let good = TraceIdentity.send(run: "rstrict01", id: 3).traceparent
            let hostile = [
                good.uppercased(), good + "-", "00-00000000000000000000000000000000-b7ad6b7169203331-01", String(repeating: "a", count: 8_000),
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0\u{e9}", "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ]
            for parent in [good] + hostile {
                let answer = try await system.apnsPush(token: token, headers: [("traceparent", parent)])
                #expect(answer.status == 200, "\(answer)")
            }
            let frames = try await device.waitForPushes(hostile.count + 1)
            #expect(frames.map(\.trace) == [good] + Array(repeating: nil, count: hostile.count), "\(frames.map(\.trace))")
        }
    }
}

extension TracePropagationTests {
    /// The secure send's fast path checks a `traceparent` with ``TraceIdentity`` and hands the
    /// text on as it came; the router's path parses it with the W3C library and writes it out
    /// again. The two must hand on the same headers for any text.
    @Test("the fast path's traceparent check takes exactly what the W3C library takes, and hands on what the library writes")
    func fastPathTraceCheckIsTheLibrarys() {
        var generator = SystemRandomNumberGenerator()
        let valid = Array("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".utf8)
        let bytes = Array("0123456789abcdefABCDEF-x ".utf8)
        var texts = [
            String(decoding: valid, as: UTF8.self), "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "",
        ]
        for _ in 0..<5_000 {
            var text = valid
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let index = Int.random(in: 0..<text.count, using: &generator)
                switch Int.random(in: 0..<6, using: &generator) {
                case 0: text.remove(at: index)
                case 1: text.insert(bytes.randomElement(using: &generator)!, at: index)
                case 2: text[index] = UInt8(ascii: "0")
                default: text[index] = bytes.randomElement(using: &generator)!
                }
            }
            texts.append(String(decoding: text, as: UTF8.self))
        }
        var accepted = 0
        for text in texts {
            let head = HTTPRequest(method: .post, scheme: "http", authority: "b", path: "/api/notifications", headerFields: [HTTPField.Name("traceparent")!: text])
            let caller = ReferenceBackend.CallerTrace(head)
            let library = TracePropagation.headers(for: caller.context)
            #expect(caller.headers.map { "\($0.0)=\($0.1)" } == library.map { "\($0.0)=\($0.1)" }, "\(text)")
            if !library.isEmpty { accepted += 1 }
        }
        #expect(accepted > 100, "enough of the texts are valid to compare what is handed on")
    }
}
