import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import Prometheus
import PushFleetMetrics
import PushFleetReport
import PushFleetResults
import PushFleetScenario
import PushFleetTestSupport
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
        #expect(result.passed, "\(result.thresholds.filter { !$0.passed })")
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
}
