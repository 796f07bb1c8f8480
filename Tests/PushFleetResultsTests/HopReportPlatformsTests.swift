import Foundation
import PushFleetCore
import PushFleetLedger
import PushFleetReport
import PushFleetResults
import Testing

/// The funnel of report.html's "Where pushes went" names the platforms the fleet has, and any
/// other something happened on; a secure send names every platform, which alone adds no column.
@Suite("Where pushes went: the fleet's platforms")
struct HopReportPlatformsTests {
    /// A watched funnel with `sends` sends and `pairs` pairs, all in hand.
    static func funnel(sends: Int, pairs: Int) -> DeliveryLedger.Funnel {
        var funnel = DeliveryLedger.Funnel()
        funnel.sends = sends
        funnel.sendsAccepted = sends
        funnel.expected = pairs
        funnel.handed = pairs
        funnel.accepted = pairs
        funnel.written = pairs
        funnel.received = pairs
        funnel.inHand = pairs
        return funnel
    }

    static func result(devices: [String: Int], funnel: [String: DeliveryLedger.Funnel], why: [RunResult.Why] = []) -> RunResult {
        var byPlatform: [String: DeliveryLedger.Counts] = [:]
        for (platform, platformFunnel) in funnel where platformFunnel.expected > 0 {
            var counts = DeliveryLedger.Counts()
            counts.expected = platformFunnel.expected
            counts.delivered = platformFunnel.inHand
            byPlatform[platform] = counts
        }
        let planned = devices.values.reduce(0, +)
        return RunResult(
            info: .init(
                tool: "pushfleet", version: "test", scenario: "platforms", scenarioFile: "platforms.yaml", scenarioText: "", seed: 1, target: "embedded",
                backendURL: "", pushServiceURL: "", host: "test", cores: 1, memoryBytes: 0, os: "test", startedAt: "", endedAt: "", durationSeconds: 1,
                aborted: false, trafficStartSecond: 0, trafficEndSecond: 1
            ),
            devices: .init(planned: planned, ready: planned, failed: 0, byPlatform: devices), operations: [], histograms: [:], delivery: .init(),
            deliveryByPlatform: byPlatform, counters: [:], users: [], timeseries: [], errors: [], thresholds: [], markers: [],
            hops: .init(view: "watched", note: nil, funnel: funnel, why: why, breakdown: [])
        )
    }

    /// The "Where pushes went" section of the report.
    static func hopsSection(_ r: RunResult) throws -> Substring {
        let html = HTMLReport.render(r)
        let start = try #require(html.range(of: "<section id=\"hops\">"))
        let end = try #require(html[start.upperBound...].range(of: "</section>"))
        return html[start.lowerBound..<end.upperBound]
    }

    /// The smoke scenario's shape: plain sends to apns, fcm and wns, and secure sends counted
    /// under every platform, webpush too.
    static let smokeFunnel = [
        "apns": funnel(sends: 1000, pairs: 900), "fcm": funnel(sends: 1000, pairs: 450), "wns": funnel(sends: 1000, pairs: 150),
        "webpush": funnel(sends: 500, pairs: 0),
    ]

    @Test("a fleet of apns, fcm and wns devices: no webpush column or chart group, its sends in a note, the others' numbers as they were")
    func noBrowsers() throws {
        let section = try Self.hopsSection(Self.result(devices: ["apns": 600, "fcm": 300, "wns": 100], funnel: Self.smokeFunnel))
        #expect(section.contains("<thead><tr><th>stage</th><th>apns</th><th>fcm</th><th>wns</th></tr></thead>"))
        #expect(section.contains("<tr><td>sends</td><td>1000</td><td>1000</td><td>1000</td></tr>"))
        #expect(section.contains("<tr><td>pairs expected</td><td>900</td><td>450</td><td>150</td></tr>"))
        #expect(!section.contains("<th>webpush</th>"))
        #expect(!section.contains("font-weight=\"700\">webpush</text>"))
        #expect(section.contains("id=\"funnel-left-out\""))
        #expect(section.contains("webpush (500 sends named it)"))
    }

    @Test("a fleet with browsers: the webpush column and chart group appear with their numbers")
    func withBrowsers() throws {
        var funnel = Self.smokeFunnel
        funnel["webpush"] = Self.funnel(sends: 1000, pairs: 200)
        let section = try Self.hopsSection(Self.result(devices: ["apns": 500, "fcm": 250, "wns": 100, "webpush": 150], funnel: funnel))
        #expect(section.contains("<thead><tr><th>stage</th><th>apns</th><th>fcm</th><th>webpush</th><th>wns</th></tr></thead>"))
        #expect(section.contains("<tr><td>pairs expected</td><td>900</td><td>450</td><td>200</td><td>150</td></tr>"))
        #expect(section.contains("font-weight=\"700\">webpush</text>"))
        #expect(!section.contains("id=\"funnel-left-out\""))
    }

    @Test("a platform the plan has no devices of but where something happened is never hidden")
    func eventsWithoutDevices() throws {
        // Pairs on it.
        var funnel = Self.smokeFunnel
        funnel["webpush"] = Self.funnel(sends: 500, pairs: 3)
        var section = try Self.hopsSection(Self.result(devices: ["apns": 600, "fcm": 300, "wns": 100], funnel: funnel))
        #expect(section.contains("<th>webpush</th>"))
        #expect(!section.contains("id=\"funnel-left-out\""))
        // Only an explanation of a pair on it.
        let why = RunResult.Why(
            outcome: "lost", hop: "push_service", cause: "refused", platform: "webpush", status: 410, reason: nil, byToken: true, count: 1,
            phrase: "refused", advice: nil
        )
        section = try Self.hopsSection(Self.result(devices: ["apns": 600, "fcm": 300, "wns": 100], funnel: Self.smokeFunnel, why: [why]))
        #expect(section.contains("<th>webpush</th>"))
    }
}
