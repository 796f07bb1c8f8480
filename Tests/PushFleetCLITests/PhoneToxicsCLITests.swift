import Foundation
import PushFleetCore
import PushFleetTestSupport
import Testing

/// The run's proxy on the phone link doing Toxiproxy's toxics to real device sockets, one window
/// each: no privilege needed, so these run with the suite.
@Suite("Phone link toxics")
struct PhoneToxicsCLITests {
    static let scenario = """
        name: toxics
        seed: 3
        fleet:
          users: 20
          platforms: { apns: 1, fcm: 1 }
          arrival: { rate: 200/s }
        lifecycle: [login, register, connect, receive]
        timeouts: { connect: 10s }
        traffic:
          - { kind: plain, rate: 10/s, duration: 17s }
        deadline: 3s
        grace: 8s
        network:
          keepalive: { ping: 1s, dead_after: 3s }
          gateway_ping: 1s
          faults:
            - { link: phone, at: 1s, for: 3s, bandwidth: 1KB/s }
            - { link: phone, at: 5s, for: 3s, slicer: { size: 8, delay: 5ms } }
            - { link: phone, at: 9s, for: 3s, reset_peer: 500ms }
            - { link: phone, at: 13s, for: 3s, timeout: 1s }
        thresholds:
          delivery.late_ratio: []
          # A loaded machine: a sender a few ms behind is not what this tests.
          sends.late_start_ratio: []
          devices.failed_ratio: []
        """

    @Test(
        "bandwidth and slicer slow the device hop in their windows; reset_peer and timeout cut sockets, devices come back and renew; nothing is lost",
        // Waiting its turn behind the suite's other whole runs counts too.
        .timeLimit(.minutes(20))
    )
    func toxics() async throws {
        let directory = try CLITests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try Self.scenario.write(to: directory.appendingPathComponent("t.yaml"), atomically: true, encoding: .utf8)
        let outcome = try await RunGate.exclusive {
            try await CLITests.run(["run", "t.yaml", "--out", "out", "--quiet"], in: directory)
        }
        #expect(outcome.status == 0, "\(outcome.output)")
        let run = try NetworkFaultCLITests.runJSON(directory)
        let windows = run["networkFaults"] as? [[String: Any]] ?? []
        try #require(windows.count == 4, "\(windows)")
        func deviceP50(_ window: Int) -> Double { (windows[window]["hopP50Ms"] as? [String: Double])?["device"] ?? 0 }
        func delivery(_ window: Int) -> [String: Int] { windows[window]["delivery"] as? [String: Int] ?? [:] }
        // A push frame of a few hundred bytes at 1 KB/s takes a few hundred ms; in 8-byte pieces
        // 5 ms apart, about as long. Outside the windows the hop is a millisecond or two.
        #expect(deviceP50(0) >= 100, "bandwidth: \(windows[0])")
        #expect(deviceP50(1) >= 100, "slicer: \(windows[1])")
        #expect(deviceP50(2) < 100, "a reset costs a reconnect, not a slow hop: \(windows[2])")
        // Reset and timed-out sockets: the devices reconnect and renew their registrations.
        let operations = run["operations"] as? [[String: Any]] ?? []
        let renewals = operations.first { $0["name"] as? String == "http.register.put" }?["count"] as? Int ?? 0
        #expect(renewals > 20, "every device registers once, and again after each reconnect: \(renewals)")
        // A timeout swallows pushes into live sockets: held and handed back when they end.
        #expect((delivery(3)["late"] ?? 0) + (delivery(3)["replaced"] ?? 0) > 0, "timeout: \(windows[3])")
        let total = run["delivery"] as? [String: Int] ?? [:]
        #expect(total["lost"] == 0 && total["duplicates"] == 0 && total["misdelivered"] == 0, "\(total)")
        for index in 0..<4 { #expect(delivery(index)["lost"] == 0, "window \(index + 1): \(windows[index])") }
        let markers = (run["markers"] as? [[String: Any]] ?? []).compactMap { $0["label"] as? String }
        #expect(markers.contains("network: phone reset peer after 500ms, 100% of devices begins"), "\(markers)")
    }
}
