import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import Prometheus
import PushFleetLedger
import PushFleetMetrics
import PushFleetReport
import PushFleetResults
import PushFleetScenario
import PushFleetTestSupport
import PushFleetWebPush
import Testing

/// Virtual browsers beside phones against the embedded system: they subscribe at the push
/// service with the backend's key, register their subscription, and decrypt every push.
@Suite("Web Push fleet", .serialized)
struct WebPushFleetTests {
    @Test(
        "four platforms against the embedded system, directly and through the hub: every browser subscribes, every push to each platform is delivered exactly",
        arguments: [false, true]
    )
    func fourPlatforms(hub: Bool) async throws {
        let yaml = """
            name: four
            seed: 8030
            target: embedded
            embedded: { hub: \(hub) }
            fleet:
              users: 16
              devices_per_user: 2
              platforms: { apns: 1, fcm: 1, wns: 1, webpush: 1 }
            lifecycle: [login, register, connect, receive, fetch_secure, fetch_rich]
            traffic:
              - { name: plain, kind: plain, platforms: [apns, fcm, wns, webpush], rate: 15/s, duration: 3s }
              - { name: secure, kind: secure, rate: 10/s, duration: 3s }
              - { name: rich, kind: rich, rate: 5/s, duration: 3s }
            # Set-up time is not under test: a loaded machine must not fail a device.
            timeouts: { login: 60s, register: 60s, connect: 60s }
            deadline: 10s
            grace: 1s
            thresholds:
              sends.late_start_ratio: []
            """
        let metrics = LiveMetrics()
        let result = try await RunGate.exclusive {
            let scenario = try ScenarioLoader.parse(yaml, file: "four.yaml")
            var options = FleetRunner.Options(scenarioFile: "four.yaml", scenarioText: yaml, version: "test", logger: .init(label: "four"))
            options.metrics = metrics
            return try await FleetRunner(scenario: scenario, options: options).run()
        }
        let browsers = try #require(result.deliveryByPlatform["webpush"])
        #expect(result.devices.ready == result.devices.planned && result.devices.failed == 0)
        for platform in ["apns", "fcm", "wns", "webpush"] {
            let c = try #require(result.deliveryByPlatform[platform], "\(platform)")
            #expect(c.expected > 0 && c.delivered == c.expected && c.lost == 0, "\(platform): \(c)")
        }
        #expect(browsers.undecryptable == 0 && result.delivery.misdelivered == 0 && result.delivery.unverified == 0)
        let subscribes = try #require(result.operations.first { $0.name == "webpush.subscribe" })
        let webPushDevices = try #require(result.devices.byPlatform["webpush"])
        #expect(subscribes.count == webPushDevices && subscribes.failures == 0)
        #expect(result.rulesHeld, "\(result.thresholds.filter { !$0.passed })")
        let html = String(decoding: try ReportFiles.render(result).first { $0.name == "report.html" }!.data, as: UTF8.self)
        #expect(html.contains(">webpush<"))
        // Every platform has its rows: in summary.csv and in the live metrics.
        let summary = String(decoding: try ReportFiles.render(result).first { $0.name == "summary.csv" }!.data, as: UTF8.self)
        #expect(summary.contains("\nwebpush.delivered,\(browsers.delivered)\n") && summary.contains("\nwebpush.undecryptable,0\n"))
        let exposition = metrics.registry.emitToString()
        #expect(exposition.contains("pushfleet_delivery_pairs_by_platform{platform=\"webpush\",outcome=\"delivered\"} \(browsers.delivered)"), "\(exposition)")
        #expect(exposition.contains("pushfleet_pushes_received_by_platform_total{platform=\"webpush\"} \(browsers.delivered)"))
        // Through the hub, every delivery took the hub's hop, the browsers' too.
        let hubHop = result.operations.first { $0.name == MetricName.hopHub }?.count ?? 0
        #expect(hub ? hubHop == result.delivery.delivered : hubHop == 0, "\(hubHop) of \(result.delivery.delivered)")
    }

    /// Browsers only, against the embedded backend, with the applicationServerKey from `source`.
    static func browsers(keySource: String) -> String {
        """
        name: browsers
        seed: 8292
        target: embedded
        fleet:
          users: 6
          devices_per_user: 2
          platforms: { webpush: 1 }
        lifecycle: [register, connect, receive]
        traffic:
          - { kind: plain, rate: 10/s, duration: 2s }
        deadline: 5s
        grace: 1s
        thresholds:
          sends.late_start_ratio: []
        api:
          headers: { Authorization: "{{basic_auth}}" }
          register:
            - { name: post, method: POST, path: /api/register, extract: { registration_id: "" } }
            - name: put
              method: PUT
              path: /api/register/{{registration_id}}
              json: { Platform: "{{device.platform}}", Handle: "{{device.push_token}}", Tags: [] }
          send:
            plain: { per_platform: true, method: POST, path: /api/notifications, query: { pns: "{{platform}}", to_tag: "{{to}}" }, json: "{{message}}" }
          receive:
            webpush: { application_server_key: \(keySource) }
        """
    }

    @Test("a backend whose key page has no key, or browsers bound to a key the backend does not sign with: the run never passes")
    func wrongKeys() async throws {
        func run(_ yaml: String) async throws -> RunResult {
            try await RunGate.exclusive {
                let scenario = try ScenarioLoader.parse(yaml, file: "browsers.yaml")
                return try await FleetRunner(
                    scenario: scenario, options: .init(scenarioFile: "browsers.yaml", scenarioText: yaml, version: "test", logger: .init(label: "browsers"))
                ).run()
            }
        }
        // The key is looked for where the backend does not put it: no browser can subscribe.
        let keyless = try await run(Self.browsers(keySource: "{ path: /api/webpush/vapid, json: /nope }"))
        #expect(!keyless.passed && keyless.devices.failed == keyless.devices.planned, "\(keyless.devices)")
        #expect(keyless.errors.contains { $0.errorClass == "webpush.vapid_key:no_key" }, "\(keyless.errors.map(\.errorClass))")
        #expect(keyless.markers.contains { $0.label.contains("has no VAPID public key at json /nope") })
        // Subscribed with another key: the push service refuses every push the backend signs (403).
        let other = WebPushKeys.generate().p256dh
        let foreign = try await run(Self.browsers(keySource: other))
        #expect(!foreign.passed && foreign.devices.ready == foreign.devices.planned)
        // The backend answers those sends as failed (its push service refused them): nobody is
        // expected of a failed send, and the failures fail the run.
        #expect(foreign.delivery.delivered == 0 && (foreign.counters["sends.failed"] ?? 0) > 0, "\(foreign.delivery) \(foreign.counters)")
        #expect(foreign.thresholds.contains { $0.metric == "sends.failed_ratio" && !$0.passed })
    }
}
