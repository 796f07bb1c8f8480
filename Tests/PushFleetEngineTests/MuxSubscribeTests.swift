import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetLedger
import PushFleetResults
import PushFleetScenario
import PushFleetTestSupport
import Testing

/// Devices on a multiplexed channel subscribe in shared frames and wait as continuations; a
/// sweep fails those the gateway never confirms.
@Suite("Multiplexed subscriptions")
struct MuxSubscribeTests {
    /// A run and how long it took, as the fleet-run tests play one.
    static func run(_ yaml: String) async throws -> (RunResult, seconds: Double) {
        let started = ContinuousClock.now
        let result = try await FleetRunTests.runUngated(yaml)
        return (result, (ContinuousClock.now - started) / .seconds(1))
    }

    @Test("600 devices arriving at once share subscribe frames of at most 256 and all come online; every push reaches them")
    func manyAtOnce() async throws {
        try await RunGate.exclusive {
            let yaml = """
                name: mux-many
                seed: 21
                target: embedded
                fleet:
                  users: 600
                  platforms: { apns: 1, fcm: 1 }
                  arrival: { rate: 100000/s }
                  push_channel: multiplexed
                lifecycle: [login, register, connect, receive]
                traffic:
                  - { kind: plain, rate: 100/s, duration: 2s }
                deadline: 30s
                grace: 1s
                thresholds:
                  sends.late_start_ratio: []
                """
            let (result, _) = try await Self.run(yaml)
            #expect(result.devices.ready == 600)
            #expect(result.delivery.expected > 0 && result.delivery.delivered == result.delivery.expected)
            #expect(result.delivery.misdelivered == 0 && result.delivery.duplicates == 0)
            #expect(result.histograms["connect"]?.count == 600)
        }
    }

    @Test("a gateway that never confirms: each subscription fails at its timeout, the devices are counted failed, and the run ends")
    func neverConfirmed() async throws {
        try await RunGate.exclusive {
            try await TestSystem.run { (system: TestSystem) async throws in
                let (proxy, port) = try await TCPProxy.start(upstreamPort: try #require(URL(string: system.pushService)?.port))
                proxy.goDown()
                let yaml = """
                    name: mux-never
                    seed: 22
                    target: { backend: "\(system.backend)", pns: "http://127.0.0.1:\(port)" }
                    fleet:
                      users: 30
                      platforms: { apns: 1 }
                      push_channel: multiplexed
                    lifecycle: [login, register, connect, receive]
                    timeouts: { connect: 1s }
                    traffic:
                      - { kind: plain, rate: 5/s, duration: 1s }
                    deadline: 1s
                    grace: 500ms
                    """
                let (result, seconds) = try await Self.run(yaml)
                await proxy.stop()
                #expect(result.devices.ready == 0 && result.devices.failed == 30)
                // Each device gives up a connect timeout (1 s) after its first attempt; waiting for
                // the whole run's end instead would not finish at all.
                #expect(seconds < 30, "\(seconds) s")
                #expect(!result.passed)
            }
        }
    }
}
