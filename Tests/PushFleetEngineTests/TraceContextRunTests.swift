import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLedger
import PushFleetResults
import PushFleetServerSupport
import PushFleetTestSupport
import ServiceLifecycle
import Testing

/// What a run's requests carry, read at a proxy in front of the reference backend: each send
/// starts its push's trace, under the id the reports name; every other request starts its own.
@Suite("Trace context on a run's requests", .serialized)
struct TraceContextRunTests {
    static func recorded(_ yaml: @escaping @Sendable (String, String) -> String) async throws -> (RunResult, [RecordingProxy.Seen]) {
        try await TestSystem.run { system in
            let proxy = RecordingProxy(upstream: system.backend)
            var logger = Logger(label: "recording")
            logger.logLevel = .critical
            let group = ServiceGroup(configuration: .init(services: [.init(service: proxy.makeService(logger: logger))], logger: logger))
            let server = Task { try await group.run() }
            defer { server.cancel() }
            let url = try await proxy.bound.value().httpURL
            let result = try await FleetRunTests.run(yaml(url, system.pushService))
            await group.triggerGracefulShutdown()
            return (result, proxy.requests)
        }
    }

    @Test("sends carry the trace their send id derives, device requests distinct traces of their own, all well formed")
    func propagated() async throws {
        let (result, requests) = try await Self.recorded { FleetRunTests.scenario(backend: $0, pushService: $1) }
        #expect(result.delivery.delivered == result.delivery.expected && result.delivery.expected > 0, "\(result.delivery)")
        let run = try #require(result.info.runID)
        let sends = requests.filter { $0.method == "POST" && $0.path.hasPrefix("/api/notifications") }
        let others = requests.filter { !($0.method == "POST" && $0.path.hasPrefix("/api/notifications")) }
        #expect(sends.count == Int(result.counters["sends"] ?? 0) && !others.isEmpty, "\(sends.count) sends, \(others.count) others")
        let parents = requests.compactMap { $0.headers["traceparent"] }
        #expect(parents.count == requests.count, "every request carries traceparent")
        #expect(parents.allSatisfy(TraceParentGrammar.isValid), "\(parents.filter { !TraceParentGrammar.isValid($0) })")
        // A one-process run numbers its sends from 1.
        let expected = Set((1...max(1, sends.count)).map { TraceIdentity.send(run: run, id: $0).traceparent })
        #expect(Set(sends.compactMap { $0.headers["traceparent"] }) == expected)
        // A secure push's fetch joins its push's trace (the frame carried the backend's context),
        // under a span of its own; every other request starts a trace of its own.
        let sendTraces = Set(expected.map { String($0.dropFirst(3).prefix(32)) })
        // (Leak probes fetch too: theirs are requests of their own.)
        let joined = others.compactMap { $0.headers["traceparent"] }.filter { sendTraces.contains(String($0.dropFirst(3).prefix(32))) }
        let secureSends = sends.filter { $0.path.hasPrefix("/api/notifications/secure") }.count
        #expect(secureSends > 0 && joined.count == secureSends, "\(joined.count) fetches joined \(secureSends) secure sends' traces")
        #expect(Set(joined).count == joined.count && Set(joined).isDisjoint(with: expected), "a fetch's span is its own, not the send's")
        let own = others.compactMap { $0.headers["traceparent"].map { String($0.dropFirst(3).prefix(32)) } }.filter { !sendTraces.contains($0) }
        #expect(Set(own).count == own.count, "each device request has a trace of its own")
        #expect(Set(own).isDisjoint(with: sendTraces))
        #expect(result.info.traceContext == true)
    }

    @Test("tracing.propagate: false leaves every request without trace context")
    func turnedOff() async throws {
        let (result, requests) = try await Self.recorded { FleetRunTests.scenario(backend: $0, pushService: $1) + "\ntracing: { propagate: false }\n" }
        #expect(result.delivery.delivered == result.delivery.expected && result.delivery.expected > 0, "\(result.delivery)")
        #expect(!requests.isEmpty && requests.allSatisfy { $0.headers["traceparent"] == nil && $0.headers["tracestate"] == nil })
        #expect(result.info.traceContext == false)
    }

    @Test("tracing.sample: 100% keeps every delivered pair for its trace, with its hops; 0% keeps none")
    func sampled() async throws {
        let all = try await TestSystem.run { system in
            try await FleetRunTests.run(FleetRunTests.scenario(backend: system.backend, pushService: system.pushService) + "\ntracing: { sample: 100% }\n")
        }
        let kept = try #require(all.sampledDeliveries)
        #expect(kept.count == min(all.delivery.delivered, RunResult.sampledLimit), "\(kept.count) of \(all.delivery.delivered)")
        #expect(kept.allSatisfy { $0.sendStartSecond <= $0.sendEndSecond && $0.sendStartSecond <= $0.receivedSecond })
        #expect(Set(kept.map { "\($0.send) \($0.device)" }).count == kept.count)
        let none = try await TestSystem.run { system in
            try await FleetRunTests.run(FleetRunTests.scenario(backend: system.backend, pushService: system.pushService) + "\ntracing: { sample: 0% }\n")
        }
        #expect(none.sampledDeliveries == nil && none.delivery.delivered > 0)
    }
}
