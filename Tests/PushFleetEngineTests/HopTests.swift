import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetLedger
import PushFleetReport
import PushFleetResults
import PushFleetScenario
import PushFleetTestSupport
import PushFleetWire
import Testing

/// Every lost or late pair is put at the hop where it went wrong, with the right count, against a
/// backend written apart from the reference one that counts what it did; the push service is
/// watched over `/observe`, as a run against `pushfleet serve` watches it.
@Suite("Where pushes went", .serialized)
struct HopTests {
    static let seed: UInt64 = 101

    static func lost(_ r: RunResult, hop: String, cause: String) -> Int {
        (r.hops?.why ?? []).filter { $0.outcome == "lost" && $0.hop == hop && $0.cause == cause }.reduce(0) { $0 + $1.count }
    }

    @Test("wrong push credentials: every lost pair is refused by the push service, with each platform's status and reason, and the summary says so")
    func wrongCredentials() async throws {
        let (result, tally) = try await HostileBackendTests.run(.wrongCredentials, seed: Self.seed)[0]
        let c = result.delivery
        let hops = try #require(result.hops)
        #expect(hops.view == "watched", "\(hops.note ?? "")")
        #expect(c.expected > 0 && c.lost == c.expected && c.delivered == 0, "\(c)")
        #expect(Self.lost(result, hop: "push_service", cause: "refused") == c.lost, "\(hops.why)")
        // Per platform, the runner's refused pairs are the pushes the backend saw refused.
        for why in hops.why {
            #expect(why.outcome == "lost" && why.hop == "push_service" && why.cause == "refused")
            #expect(tally.refused["\(why.platform) \(why.status ?? 0)", default: 0] >= why.count, "\(why) vs \(tally.refused)")
        }
        let apns = hops.why.filter { $0.platform == "apns" }
        #expect(!apns.isEmpty && apns.allSatisfy { $0.status == 403 && $0.reason == "InvalidProviderToken" }, "\(apns)")
        let fcm = hops.why.filter { $0.platform == "fcm" }
        #expect(!fcm.isEmpty && fcm.allSatisfy { $0.status == 401 && $0.reason == "UNAUTHENTICATED" }, "\(fcm)")
        #expect(hops.why.filter { $0.platform == "wns" }.allSatisfy { $0.status == 401 })
        #expect(apns.first?.advice == "check the backend's push credentials")
        // Where it shows: errors.csv, incidents.csv, the summary, the funnel.
        #expect(result.errors.contains { $0.errorClass == "pns:apns:403:InvalidProviderToken" }, "\(result.errors.map(\.errorClass))")
        #expect(result.errors.contains { $0.errorClass == "pns:fcm:401:UNAUTHENTICATED" })
        let lines = WhyLost.lines(result)
        // PUSHFLEET_SHOW_SUMMARY=1 prints what a user of such a run reads.
        if ProcessInfo.processInfo.environment["PUSHFLEET_SHOW_SUMMARY"] != nil {
            print(lines.joined(separator: "\n"))
            print(hops.funnel)
            print(result.errors.map { "\($0.errorClass) ×\($0.count)" })
        }
        #expect(lines.first?.hasPrefix("lost \(c.lost): refused by the push service \(c.lost) — ") == true, "\(lines)")
        #expect(lines.first?.hasSuffix(": check the backend's push credentials") == true, "\(lines)")
        #expect(lines.first?.contains("wns 401 \"") != false, "a reason in words is quoted: \(lines)")
        let incidents = try #require(result.incidents).filter { $0.outcome == "lost" }
        #expect(!incidents.isEmpty && incidents.allSatisfy { $0.hop == "push_service" && $0.reason?.hasPrefix("refused 40") == true })
        let csv = String(decoding: try #require(try ReportFiles.render(result).first { $0.name == "incidents.csv" }).data, as: UTF8.self)
        #expect(csv.hasPrefix("outcome,send,send_kind,sender,recipient,device,device_user,platform,send_start_s,event_s,detail,hop,reason,trace_id\n"))
        #expect(csv.contains(",push_service,refused 403 InvalidProviderToken,"))
        // Each row names its send's trace, the one its request carried.
        let run = try #require(result.info.runID)
        #expect(result.info.traceContext == true)
        for incident in incidents {
            let id = try #require(incident.send)
            let trace = TraceIdentity.send(run: run, id: id).traceID
            #expect(result.traceID(of: incident) == trace)
            #expect(csv.contains(",\(trace)\n"), "\(trace)")
        }
        for (platform, funnel) in hops.funnel {
            #expect(funnel.handed == funnel.expected && funnel.accepted == 0 && funnel.received == 0, "\(platform): \(funnel)")
        }
        #expect(!result.passed)
    }

    @Test("a backend that answers sends without pushing: those pairs never reached the push service, exactly as many as it dropped")
    func backendDrops() async throws {
        let (result, tally) = try await HostileBackendTests.run(.dropAndDuplicate, seed: Self.seed)[0]
        #expect(tally.dropped > 0)
        #expect(result.delivery.lost == tally.dropped, "\(result.delivery) vs \(tally)")
        #expect(Self.lost(result, hop: "backend", cause: "not_pushed") == tally.dropped, "\(result.hops?.why ?? [])")
    }

    @Test("the push service's drop fault: every lost pair is dropped by the fault; the delivered ones' hops add up to their delivery latency")
    func dropFault() async throws {
        let (result, _) = try await HostileBackendTests.run(.correct, seed: Self.seed, faults: FaultSettings(drop: 0.3, seed: 7))[0]
        let c = result.delivery
        #expect(c.lost > 0 && c.delivered > 0, "\(c)")
        #expect(Self.lost(result, hop: "push_service", cause: "dropped") == c.lost, "\(result.hops?.why ?? [])")
        let funnel = try #require(result.hops?.funnel.values)
        #expect(funnel.reduce(0) { $0 + ($1.accepted ?? 0) } == funnel.reduce(0) { $0 + ($1.handed ?? 0) })
        // Means add up exactly; the histograms' means are within their precision.
        let delivery = try #require(result.histograms["delivery.raw"])
        let parts = ["hop.backend.raw", "hop.push_service", "hop.device"].map { result.histograms[$0] }
        #expect(parts.allSatisfy { $0?.count == delivery.count }, "\(parts.map { $0?.count ?? -1 }) vs \(delivery.count)")
        let sum = parts.reduce(0.0) { $0 + ($1?.mean ?? 0) }
        #expect(abs(sum - delivery.mean) <= max(0.02 * delivery.mean, 50_000), "hops \(sum) ns vs delivery \(delivery.mean) ns")
        let breakdown = try #require(result.hops?.breakdown.first)
        #expect(abs(breakdown.backendMs + breakdown.hubMs + breakdown.pushServiceMs + breakdown.deviceMs - breakdown.deliveryMs) < 0.001)
    }
}

/// Runs with the push service in this process, watched in process: devices held offline, a
/// push service that is not pushfleet's, and the hub.
@Suite("Where pushes went, embedded", .serialized)
struct EmbeddedHopTests {
    static func run(_ yaml: String) async throws -> RunResult {
        try await RunGate.exclusive {
            let scenario = try ScenarioLoader.parse(yaml, file: "hops.yaml")
            return try await FleetRunner(scenario: scenario, options: .init(scenarioFile: "hops.yaml", scenarioText: yaml, version: "test", logger: .init(label: "hops"))).run()
        }
    }

    @Test("devices the push service takes offline: their pushes are held, and late ones are put at the push service as held while offline")
    func heldWhileOffline() async throws {
        let result = try await Self.run(
            """
            name: hops-offline
            seed: 5
            target: embedded
            fleet:
              users: 20
              devices_per_user: 1
              platforms: { apns: 1 }
            lifecycle: [login, register, connect, receive]
            timeouts: { login: 60s, register: 60s, connect: 60s }
            traffic:
              - { name: plain, kind: plain, platforms: [apns], rate: 60/s, duration: 4s }
            faults:
              - { at: 1s, disconnect: 100% }
              - { at: 2s, disconnect: 100% }
              - { at: 3s, disconnect: 100% }
            deadline: 50ms
            grace: 8s
            thresholds:
              delivery.late_ratio: []
              sends.late_start_ratio: []
            """
        )
        let why = try #require(result.hops?.why)
        let late = why.filter { $0.outcome == "late" }
        #expect(result.delivery.late > 0, "\(result.delivery)")
        let held = late.filter { $0.hop == "push_service" && $0.cause == "held_offline" }.reduce(0) { $0 + $1.count }
        #expect(held > 0, "\(late)")
        #expect(late.reduce(0) { $0 + $1.count } == result.delivery.late)
    }

    @Test("the hub: a hop of its own, and the hops still add up to the delivery latency")
    func throughTheHub() async throws {
        let result = try await Self.run(
            """
            name: hops-hub
            seed: 6
            target: embedded
            embedded: { hub: true }
            fleet:
              users: 10
              devices_per_user: 1
              platforms: { apns: 1, fcm: 1 }
            lifecycle: [login, register, connect, receive, fetch_secure]
            timeouts: { login: 60s, register: 60s, connect: 60s }
            traffic:
              - { name: secure, kind: secure, rate: 10/s, duration: 2s }
            thresholds:
              sends.late_start_ratio: []
            """
        )
        #expect(result.delivery.delivered == result.delivery.expected && result.delivery.expected > 0, "\(result.delivery)")
        let hub = try #require(result.histograms["hop.hub"])
        let delivery = try #require(result.histograms["delivery.raw"])
        #expect(hub.count == delivery.count)
        let sum = ["hop.backend.raw", "hop.hub", "hop.push_service", "hop.device"].reduce(0.0) { $0 + (result.histograms[$1]?.mean ?? 0) }
        #expect(abs(sum - delivery.mean) <= max(0.02 * delivery.mean, 50_000), "hops \(sum) ns vs delivery \(delivery.mean) ns")
        #expect(result.hops?.view == "watched")
    }
}
