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

/// A whole run against a backend with one device endpoint (and body) per platform, a plain
/// push endpoint per platform, and a secure send that names its stored content `secret_id`:
/// described with steps keyed by platform and `content_id:`.
@Suite("A backend with an endpoint per platform", .serialized)
struct PlatformEndpointsTests {
    static func scenario(backend: String, pns: String) -> String {
        """
        name: platform-endpoints
        seed: 11
        target: { backend: "\(backend)", pns: "\(pns)" }
        fleet:
          users: 6
          devices_per_user: 3
          platforms: { apns: 1, fcm: 1, wns: 1 }
        lifecycle: [register, connect, receive, fetch_secure]
        traffic:
          - { name: plain, kind: plain, rate: 10/s, duration: 2s }
          - { name: secure, kind: secure, rate: 8/s, duration: 2s }
        # Neither lateness nor set-up time is under test here: a loaded test machine (CI's suite
        # beside its fuzzers once held a device's connection past 10 s) must not fail a device
        # or turn pushes late.
        timeouts: { login: 60s, register: 60s, connect: 60s, send: 60s, fetch: 3s }
        deadline: 5s
        grace: 1s
        quiet_period: 1s
        thresholds:
          sends.late_start_ratio: []
        api:
          headers: { Authorization: "{{basic_auth}}" }
          register:
            apns: { method: POST, path: /devices/apns, json: { token: "{{device.push_token}}" }, expect: [201] }
            fcm: { method: POST, path: /devices/fcm, json: { registration_id: "{{device.push_token}}" }, expect: [201] }
            wns:
              - { name: channel, method: POST, path: /devices/wns, json: { channel_uri: "{{device.push_token}}" }, expect: [201], extract: { device: /device } }
              - { name: activate, method: PUT, path: "/devices/wns/{{device}}/active", expect: [204] }
          send:
            plain:
              apns: { method: POST, path: /push/apns, json: { user: "{{to}}", alert: "{{message}}" } }
              fcm: { method: POST, path: /push/fcm, json: { user: "{{to}}", data: { text: "{{message}}" } } }
              wns: { method: POST, path: /push/wns, json: { user: "{{to}}", toast: "{{message}}" } }
            secure:
              method: POST
              path: /secrets
              json: { to: "{{to}}", payload: "{{message}}" }
              content_id: /secret_id
          fetch:
            secure: { path: "/secrets/{{id}}", content: /payload }
          receive:
            apns: { token: apns_hex, secure_id: /secretId }
            fcm: { token: fcm, secure_id: /message/data/secretId }
            wns: { token: channel_id, secure_id: { body: true, push_type: wns/raw } }
        """
    }

    @Test("each device registers at its platform's endpoint; a push sent to the wrong user with its read refused is misdelivered, by the content id")
    func run() async throws {
        try await RunGate.exclusive {
            try await TestSystem.run { (system: TestSystem) async throws in
                let backend = PlatformEndpointsBackend(pushService: system.pushService, misdeliverEvery: 4)
                var logger = Logger(label: "platform-endpoints")
                logger.logLevel = .critical
                let group = ServiceGroup(configuration: .init(services: [.init(service: backend.makeService(logger: logger))], logger: logger))
                let server = Task { try await group.run() }
                defer { server.cancel() }
                let url = try await backend.bound.value().httpURL
                let yaml = Self.scenario(backend: url, pns: system.pushService)
                let loaded = try ScenarioLoader.load(text: yaml, file: "platform-endpoints.yaml")
                #expect(loaded.warnings.isEmpty, "\(loaded.warnings)")
                let result = try await FleetRunner(
                    scenario: loaded.scenario,
                    options: .init(scenarioFile: "platform-endpoints.yaml", scenarioText: yaml, version: "test", logger: logger)
                ).run()
                let tally = backend.tally
                await group.triggerGracefulShutdown()
                await backend.shutdown()

                let plan = FleetPlan(scenario: loaded.scenario)
                // The phones' platforms, each at its own endpoint (browsers are not in this fleet).
                for platform in [Scenario.PlatformName.apns, .fcm, .wns] {
                    let devices = plan.devices.filter { $0.platform == platform }.count
                    #expect(devices > 0 && tally.registered[Platform(name: platform.rawValue)!] == devices, "\(platform): \(tally.registered)")
                }
                #expect(tally.refused == 0)
                #expect(result.devices.ready == result.devices.planned, "\(result.devices)")
                #expect(result.errors.isEmpty, "\(result.errors.map(\.errorClass))")
                let c = result.delivery
                #expect(tally.misdelivered > 0 && tally.dropped > 0)
                // Tied to its send only by the id the send's answer named (no recipient fetched
                // it), a push sent to the wrong user whose read was refused is misdelivered, not
                // unverified; the recipient's devices lost it.
                #expect(c.misdelivered == tally.misdelivered && c.unverified == 0, "\(c) vs \(tally)")
                #expect(c.lost == tally.dropped && c.expected > 0 && c.delivered == c.expected - c.lost, "\(c) vs \(tally)")
                #expect(c.duplicates == 0 && c.leaks == 0, "\(c)")
                #expect(!result.passed)
            }
        }
    }
}
