import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetLedger
import PushFleetResults
import PushFleetScenario
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import ServiceLifecycle
import Testing

/// Whole runs against a backend that misbehaves in one way at a time and counts what it did:
/// the runner's counts must equal that ground truth exactly, over several seeds
/// (`PUSHFLEET_ADVERSARIAL_SEEDS`, default 2), and a broken backend must never pass. One run
/// at a time, so the rest of the suite's load does not turn pushes late.
@Suite("Hostile backends", .serialized)
struct HostileBackendTests {
    static var seeds: [UInt64] {
        let count = ProcessInfo.processInfo.environment["PUSHFLEET_ADVERSARIAL_SEEDS"].flatMap(Int.init) ?? 2
        return (0..<max(1, count)).map { 100 + UInt64($0) }
    }

    enum Traffic {
        case mixed, rich
        /// Secure sends only, sparse: sends to one user seldom overlap, so "after the backend
        /// was told" reads the same by the backend's clock and the runner's.
        case sparse
    }

    static func scenario(
        backend: String, pns: String, seed: UInt64, traffic kind: Traffic = .mixed, probes: Bool = false, fetchTimeout: String = "3s",
        webPush: Bool = false
    ) -> String {
        let traffic =
            switch kind {
            case .mixed: "  - { name: plain, kind: plain, rate: 15/s, duration: 2s }\n  - { name: secure, kind: secure, rate: 10/s, duration: 2s }"
            case .rich: "  - { name: rich, kind: rich, rate: 10/s, duration: 2s }"
            case .sparse: "  - { name: secure, kind: secure, rate: 6/s, duration: 4s }"
            }
        return """
            name: hostile
            seed: \(seed)
            target: { backend: "\(backend)", pns: "\(pns)" }
            fleet:
              users: 6
              devices_per_user: 2
              platforms: { apns: 1, fcm: 1, wns: 1\(webPush ? ", webpush: 1" : "") }
            lifecycle: [login, register, connect, receive, fetch_secure, fetch_rich]
            traffic:
            \(traffic)
            # Neither set-up time nor lateness is under test here: a loaded test machine (CI's
            # suite once took 8 s to connect a device) must not fail a device or turn pushes late.
            timeouts: { login: 60s, register: 60s, connect: 60s, fetch: \(fetchTimeout) }
            deadline: 10s
            grace: 2s
            quiet_period: 1s
            leak_probes: \(probes ? "100%" : "0")
            thresholds:
              # A handful of sends on a test machine shared with other runs: a late start is noise.
              sends.late_start_ratio: []
            """
    }

    /// With `PUSHFLEET_ADVERSARIAL_SEEDS` set (a campaign), one line per run: the runner's counts
    /// beside the backend's own.
    static func report(_ behaviour: HostileBackend.Behaviour, seed: UInt64, _ c: DeliveryLedger.Counts, _ t: HostileBackend.Tally) {
        guard ProcessInfo.processInfo.environment["PUSHFLEET_ADVERSARIAL_SEEDS"] != nil else { return }
        print(
            "hostile | \(behaviour) | seed \(seed) | runner: expected \(c.expected) delivered \(c.delivered) lost \(c.lost) misdelivered \(c.misdelivered) duplicates \(c.duplicates) stale \(c.stale) unverified \(c.unverified) unregistered \(c.unregistered) dead-token \(c.sentToDeadToken) leaks \(c.leaks) | backend: \(t)"
        )
    }

    /// Runs `runs` scenarios against one hostile backend in front of a fresh push service.
    static func run(
        _ behaviour: HostileBackend.Behaviour, seed: UInt64, runs: Int = 1, traffic: Traffic = .mixed, probes: Bool = false,
        faults: FaultSettings? = nil, fetchTimeout: String = "3s", webPush: Bool = false
    ) async throws -> [(RunResult, HostileBackend.Tally)] {
        try await RunGate.exclusive {
            try await runUngated(behaviour, seed: seed, runs: runs, traffic: traffic, probes: probes, faults: faults, fetchTimeout: fetchTimeout, webPush: webPush)
        }
    }

    private static func runUngated(
        _ behaviour: HostileBackend.Behaviour, seed: UInt64, runs: Int, traffic: Traffic, probes: Bool, faults: FaultSettings?, fetchTimeout: String,
        webPush: Bool
    ) async throws -> [(RunResult, HostileBackend.Tally)] {
        try await TestSystem.run { (system: TestSystem) async throws in
            if let faults { try await system.setFaults(faults) }
            let backend = HostileBackend(behaviour: behaviour, pushService: system.pushService, seed: seed)
            var logger = Logger(label: "hostile")
            logger.logLevel = .critical
            let group = ServiceGroup(configuration: .init(services: [.init(service: backend.makeService(logger: logger))], logger: logger))
            let server = Task { try await group.run() }
            defer { server.cancel() }
            let url = try await backend.bound.value().httpURL
            var results: [(RunResult, HostileBackend.Tally)] = []
            for _ in 0..<runs {
                backend.nextRun()
                let yaml = scenario(backend: url, pns: system.pushService, seed: seed, traffic: traffic, probes: probes, fetchTimeout: fetchTimeout, webPush: webPush)
                let parsed = try ScenarioLoader.parse(yaml, file: "hostile.yaml")
                let result = try await FleetRunner(
                    scenario: parsed, options: .init(scenarioFile: "hostile.yaml", scenarioText: yaml, version: "test", logger: logger)
                ).run()
                results.append((result, backend.tally))
                report(behaviour, seed: seed, result.delivery, backend.tally)
            }
            await group.triggerGracefulShutdown()
            await backend.shutdown()
            return results
        }
    }

    @Test("a correct backend shows zeros and passes")
    func correct() async throws {
        for seed in Self.seeds {
            let (result, tally) = try await Self.run(.correct, seed: seed)[0]
            let c = result.delivery
            #expect(tally == .init(), "seed \(seed)")
            #expect(c.expected > 0 && c.delivered == c.expected, "seed \(seed): \(c)")
            #expect(c.misdelivered + c.duplicates + c.lost + c.stale + c.unverified + c.sentToDeadToken + c.leaks == 0, "seed \(seed): \(c)")
            #expect(result.rulesHeld, "seed \(seed): \(result.thresholds.filter { !$0.passed })")
        }
    }

    @Test("secure pushes misdelivered and refused to the wrong reader with any status are counted misdelivered", arguments: [403, 500, nil] as [Int?])
    func foreignReadRefused(status: Int?) async throws {
        for seed in Self.seeds {
            // A read that never answers (the backend holds it 6 s) meets the fetch timeout.
            let (result, tally) = try await Self.run(.foreignRead(status: status), seed: seed, fetchTimeout: "2s")[0]
            let c = result.delivery
            #expect(tally.misdelivered > 0, "seed \(seed)")
            #expect(c.misdelivered == tally.misdelivered, "seed \(seed): \(c) vs \(tally)")
            #expect(c.unverified == 0 && c.lost == 0 && c.leaks == 0 && c.duplicates == 0 && c.delivered == c.expected, "seed \(seed): \(c)")
            #expect(!result.passed, "seed \(seed)")
            #expect((result.incidents ?? []).filter { $0.outcome == "misdelivered" }.allSatisfy { $0.detail.hasPrefix("fetch ") }, "seed \(seed)")
        }
    }

    @Test("a backend that serves others' notifications: every foreign read is one leak, and the true recipient's probe is none")
    func foreignReadServed() async throws {
        for seed in Self.seeds {
            let (result, tally) = try await Self.run(.foreignRead(status: 200), seed: seed, probes: true)[0]
            let c = result.delivery
            #expect(c.misdelivered == tally.misdelivered, "seed \(seed): \(c) vs \(tally)")
            #expect(c.leaks == tally.foreignReadsServed && c.leaks > 0, "seed \(seed): \(c) vs \(tally)")
            #expect(!result.passed, "seed \(seed)")
        }
    }

    @Test("a backend that ignores Unregistered: every push after it was told is counted, nothing is lost", arguments: [false, true])
    func unregisteredFeedback(honour: Bool) async throws {
        for seed in Self.seeds {
            let faults = FaultSettings(unregisteredRatio: 0.5, seed: seed)
            let (result, tally) = try await Self.run(.unregistered(honour: honour), seed: seed, traffic: .sparse, faults: faults)[0]
            let c = result.delivery
            #expect(tally.unregistered > 0, "seed \(seed)")
            #expect(c.unregistered == tally.unregistered && c.sentToDeadToken == tally.sentToDeadToken, "seed \(seed): \(c) vs \(tally)")
            #expect(c.lost == 0 && c.misdelivered == 0 && c.unverified == 0, "seed \(seed): \(c)")
            if honour {
                #expect(c.sentToDeadToken == 0, "seed \(seed)")
            } else {
                #expect(c.sentToDeadToken > 0 && !result.passed, "seed \(seed): \(c)")
            }
        }
    }

    @Test("pushes replayed from an earlier run are stale, never credited")
    func replay() async throws {
        for seed in Self.seeds {
            let runs = try await Self.run(.replay, seed: seed, runs: 2)
            let (first, second) = (runs[0], runs[1])
            #expect(first.0.delivery.stale == 0 && first.1.replayed == 0, "seed \(seed)")
            let c = second.0.delivery
            #expect(second.1.replayed > 0 && c.stale == second.1.replayed, "seed \(seed): \(c) vs \(second.1)")
            #expect(c.misdelivered == 0 && c.lost == 0 && c.delivered == c.expected, "seed \(seed): \(c)")
            #expect(!second.0.passed, "seed \(seed)")
            #expect(first.0.info.runID != second.0.info.runID)
        }
    }

    @Test("a backend serving its own rich image is judged by the id and recipient: nothing misdelivered")
    func ownRichImage() async throws {
        for seed in Self.seeds {
            let (result, tally) = try await Self.run(.ownRichImage, seed: seed, traffic: .rich)[0]
            let c = result.delivery
            #expect(tally == .init())
            #expect(c.expected > 0 && c.delivered == c.expected && c.misdelivered == 0 && c.unverified == 0, "seed \(seed): \(c)")
            #expect(result.rulesHeld, "seed \(seed): \(result.thresholds.filter { !$0.passed })")
        }
    }

    @Test("the same push misdelivered twice: one misdelivery and one duplicate each")
    func misdeliverTwice() async throws {
        for seed in Self.seeds {
            let (result, tally) = try await Self.run(.misdeliverTwice, seed: seed)[0]
            let c = result.delivery
            #expect(tally.misdelivered > 0, "seed \(seed)")
            #expect(c.misdelivered == tally.misdelivered && c.duplicates == tally.duplicated, "seed \(seed): \(c) vs \(tally)")
            #expect(c.lost == 0 && !result.passed, "seed \(seed): \(c)")
        }
    }

    @Test("a slow backend: late misdeliveries are still seen, nothing expected is lost")
    func slow() async throws {
        for seed in Self.seeds {
            let (result, tally) = try await Self.run(.slow, seed: seed)[0]
            let c = result.delivery
            #expect(c.misdelivered == tally.misdelivered, "seed \(seed): \(c) vs \(tally)")
            #expect(c.lost == 0 && c.late == 0 && c.delivered == c.expected && c.unverified == 0, "seed \(seed): \(c)")
        }
    }

    @Test("dropped and duplicated pushes are lost and duplicates, exactly")
    func dropAndDuplicate() async throws {
        for seed in Self.seeds {
            let (result, tally) = try await Self.run(.dropAndDuplicate, seed: seed)[0]
            let c = result.delivery
            #expect(tally.dropped > 0 && tally.duplicated > 0, "seed \(seed)")
            #expect(c.lost == tally.dropped && c.duplicates == tally.duplicated, "seed \(seed): \(c) vs \(tally)")
            #expect(c.misdelivered == 0 && !result.passed, "seed \(seed): \(c)")
        }
    }

    @Test("browsers among the devices: a correct backend's Web Push, in both encodings, is delivered exactly and passes")
    func webPushCorrect() async throws {
        for seed in Self.seeds {
            let (result, tally) = try await Self.run(.correct, seed: seed, webPush: true)[0]
            let c = result.delivery
            let browsers = try #require(result.deliveryByPlatform["webpush"], "seed \(seed)")
            #expect(tally == .init(), "seed \(seed): \(tally)")
            #expect(browsers.expected > 0 && browsers.delivered == browsers.expected, "seed \(seed): \(browsers)")
            #expect(c.expected > 0 && c.delivered == c.expected && c.undecryptable == 0, "seed \(seed): \(c)")
            #expect(result.rulesHeld, "seed \(seed): \(result.thresholds.filter { !$0.passed })")
        }
    }

    @Test("Web Push encrypted for other keys: each such push is one undecryptable and its pair lost, exactly, and the run fails")
    func webPushForeignKeys() async throws {
        for seed in Self.seeds {
            let (result, tally) = try await Self.run(.foreignWebPushKeys, seed: seed, webPush: true)[0]
            let c = result.delivery
            #expect(tally.undecryptable > 0, "seed \(seed)")
            #expect(c.undecryptable == tally.undecryptable && c.lost == tally.undecryptable, "seed \(seed): \(c) vs \(tally)")
            #expect(c.misdelivered + c.duplicates + c.stale + c.unverified == 0, "seed \(seed): \(c)")
            #expect(result.deliveryByPlatform["webpush"]?.undecryptable == tally.undecryptable, "seed \(seed)")
            #expect(!result.passed && result.thresholds.contains { $0.metric == "delivery.undecryptable" && !$0.passed }, "seed \(seed)")
            #expect((result.incidents ?? []).contains { $0.outcome == "undecryptable" && $0.platform == "webpush" }, "seed \(seed)")
            // Each lost pair is put where it went wrong: the browser could not decrypt it.
            let lost = (result.incidents ?? []).filter { $0.outcome == "lost" }
            #expect(!lost.isEmpty && lost.allSatisfy { $0.hop == "device" && $0.detail.contains("did not decrypt") }, "seed \(seed): \(lost.map(\.detail))")
        }
    }

    @Test("a backend that fails mid-run, or refuses devices, never passes, even with no thresholds of the scenario's")
    func neverAFalsePass() async throws {
        let seed = Self.seeds[0]
        let (dying, _) = try await Self.run(.failsAfter(sends: 20), seed: seed)[0]
        #expect(!dying.passed)
        #expect(dying.thresholds.filter { !$0.passed }.map(\.metric).contains("sends.failed_ratio"), "\(dying.thresholds.filter { !$0.passed })")
        #expect(dying.errors.contains { $0.errorClass == "send:status_500" })
        let (refusing, _) = try await Self.run(.refusesRegistration, seed: seed)[0]
        #expect(!refusing.passed && refusing.devices.failed == 6, "\(refusing.devices)")
        #expect(refusing.thresholds.filter { !$0.passed }.map(\.metric).contains("devices.failed_ratio"))
        #expect(refusing.errors.contains { $0.errorClass == "register.put:status_401" }, "\(refusing.errors.map(\.errorClass))")
    }
}
