import Foundation
import Logging
import Prometheus
import PushFleetCore
import PushFleetLedger
import PushFleetReport
import PushFleetEngine
import PushFleetLauncher
import PushFleetMetrics
import PushFleetResults
import PushFleetScenario
import PushFleetServerSupport
import PushFleetTestSupport
import ServiceLifecycle
import Synchronization
import Testing

/// Whole runs over real sockets: the checker must count exactly what a broken backend did, and
/// find nothing wrong with the reference backend.
@Suite("Fleet runs")
struct FleetRunTests {
    /// Four users with one APNs device each, plain sends among them, and secure sends for the
    /// leak probes (every device probes). The deadline is long because lateness is not judged
    /// here and a loaded test machine delays pushes; a run that expects losses passes a short
    /// one, since its drain waits that long for them.
    static func scenario(backend: String? = nil, pushService: String? = nil, deadline: String = "30s") -> String {
        let target = backend.map { "{ backend: \"\($0)\", pns: \"\(pushService!)\" }" } ?? "embedded"
        return """
            name: checker
            seed: 9
            target: \(target)
            fleet:
              users: 4
              devices_per_user: 1
              platforms: { apns: 1 }
            lifecycle: [login, register, connect, receive, fetch_secure]
            traffic:
              - { name: plain, kind: plain, platforms: [apns], rate: 20/s, duration: 2s }
              - { name: secure, kind: secure, rate: 10/s, duration: 2s }
            # Set-up time is not under test: a loaded machine must not fail a device.
            timeouts: { login: 60s, register: 60s, connect: 60s }
            deadline: \(deadline)
            grace: 1s
            leak_probes: 100%
            thresholds:
              delivery.misdelivered: ["count == 0"]
              delivery.lost: ["count == 0"]
              delivery.duplicates: ["count == 0"]
              leaks: ["count == 0"]
              # A handful of sends on a test machine shared with other runs: a late start is noise.
              sends.late_start_ratio: []
            """
    }

    static func run(_ yaml: String, metrics: LiveMetrics? = nil) async throws -> RunResult {
        try await RunGate.exclusive { try await runUngated(yaml, metrics: metrics) }
    }

    /// For a test that already holds the gate (it acts on the run while it lasts).
    static func runUngated(
        _ yaml: String, metrics: LiveMetrics? = nil, beforeTraffic: (@Sendable () async -> Void)? = nil
    ) async throws -> RunResult {
        let scenario = try ScenarioLoader.parse(yaml, file: "checker.yaml")
        var logger = Logger(label: "test-fleet")
        logger.logLevel = .warning
        var options = FleetRunner.Options(scenarioFile: "checker.yaml", scenarioText: yaml, version: "test", logger: logger)
        options.metrics = metrics
        options.beforeTraffic = beforeTraffic
        return try await FleetRunner(scenario: scenario, options: options).run()
    }

    /// Runs `body` with a ``FaultyBackend`` in front of the system's backend (its URL given),
    /// and stops it after.
    static func behindFaultyBackend<T>(
        _ system: TestSystem, misdeliver: Int, drop: Int, duplicate: Int, _ body: (FaultyBackend, String) async throws -> T
    ) async throws -> T {
        let faulty = FaultyBackend(upstream: system.backend, misdeliver: misdeliver, drop: drop, duplicate: duplicate)
        var logger = Logger(label: "faulty")
        logger.logLevel = .critical
        let group = ServiceGroup(configuration: .init(services: [.init(service: faulty.makeService(logger: logger))], logger: logger))
        let server = Task { try await group.run() }
        defer { server.cancel() }
        let result = try await body(faulty, try await faulty.bound.value().httpURL)
        await group.triggerGracefulShutdown()
        return result
    }

    @Test("a backend that misdelivers 3, drops 2, duplicates 4 and leaks 1 is caught exactly")
    func faultyBackend() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let (faulty, result) = try await Self.behindFaultyBackend(system, misdeliver: 3, drop: 2, duplicate: 4) { faulty, proxy in
                (faulty, try await Self.run(Self.scenario(backend: proxy, pushService: system.pushService, deadline: "2s")))
            }
            #expect(faulty.tally.withLock { $0 } == .init(misdelivered: 3, dropped: 2, duplicated: 4, leaked: 1))
            #expect(result.delivery.misdelivered == 3)
            #expect(result.delivery.lost == 2)
            #expect(result.delivery.duplicates == 4)
            #expect(result.delivery.leaks == 1)
            #expect(!result.passed)
            // The scenario's own rules, and the default gate's loss budget it does not override.
            #expect(result.thresholds.filter { !$0.passed }.map(\.metric).sorted() == [
                "delivery.duplicates", "delivery.lost", "delivery.lost_ratio", "delivery.misdelivered", "leaks",
            ])
            #expect(result.thresholds.first { $0.metric == "delivery.lost_ratio" }?.origin == "default")
            #expect(result.thresholds.filter { $0.metric == "leaks" }.map(\.origin) == [nil])
            #expect(Set((result.incidents ?? []).map(\.outcome)) == ["misdelivered", "lost", "duplicate", "leak"])
            #expect(result.incidentTotals?["lost"] == 2)
            #expect(result.errors.contains { $0.errorClass == "probe:foreign_read_succeeded" })
        }
    }

    @Test("credentials file, token login, per-device HTTP and a multiplexed channel, with departures")
    func options() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try "# team\nann:pw-1\nben:pw-2\ncid:pw-3\n".write(to: directory.appendingPathComponent("users.txt"), atomically: true, encoding: .utf8)
        let yaml = """
            name: options
            auth: token
            fleet:
              users: 3
              devices_per_user: 2
              platforms: { apns: 1, wns: 1 }
              push_channel: multiplexed
              http: per_device
              credentials: users.txt
              departure: { share: 50%, at: 1500ms }
            lifecycle: [login, register, connect, receive, fetch_secure]
            traffic:
              - { kind: secure, to: { user: ben }, rate: 10/s, duration: 3s }
            deadline: 30s
            grace: 1s
            """
        let file = directory.appendingPathComponent("options.yaml").path
        try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        let scenario = try ScenarioLoader.load(path: file)
        var logger = Logger(label: "test-fleet")
        logger.logLevel = .warning
        let result = try await RunGate.exclusive {
            try await FleetRunner(scenario: scenario, options: .init(scenarioFile: file, scenarioText: yaml, version: "test", logger: logger)).run()
        }
        #expect(result.devices.ready == 6)
        #expect(result.users.map(\.user) == ["ann", "ben", "cid"])
        #expect(result.operations.first { $0.name == "http.login" }?.count == 6)
        let ben = result.users[1].counts
        #expect(ben.expected > 0 && ben.lost == 0 && ben.misdelivered == 0)
        #expect(result.users[0].counts.expected == 0 && result.users[2].counts.expected == 0)
        #expect(result.delivery.misdelivered == 0 && result.delivery.leaks == 0)
        #expect(result.markers.contains { $0.label.hasPrefix("departure") })
        #expect((try? ScenarioLoader.parse(yaml.replacingOccurrences(of: "users: 3", with: "users: 4"), file: file)) == nil)
    }

    @Test("user names with characters a URL or a tag reserves reach only their own devices, with or without the hub", arguments: [false, true])
    func reservedCharactersInNames(hub: Bool) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // `bob&x=1` once went into `?to_tag=` as it was: the backend read `bob`, and the runner
        // misdelivered by itself. `+` reads as a space in a query, `#` ends it, `%` escapes.
        try "bob&x=1:pw-1\nbob:pw-2\nann+1:pw-3\nann 1:pw-4\ncid#2:pw-5\nzoë%20:pw-6\n".write(
            to: directory.appendingPathComponent("users.txt"), atomically: true, encoding: .utf8
        )
        let yaml = """
            name: reserved-names
            seed: 3
            embedded: { hub: \(hub) }
            fleet:
              users: 6
              devices_per_user: 2
              platforms: { apns: 1, fcm: 1 }
              credentials: users.txt
            lifecycle: [login, register, connect, receive, fetch_secure]
            traffic:
              - { kind: plain, rate: 20/s, duration: 2s }
              - { kind: secure, rate: 10/s, duration: 2s }
            leak_probes: 50%
            deadline: 30s
            grace: 1s
            thresholds:
              sends.late_start_ratio: []
            """
        let file = directory.appendingPathComponent("names.yaml").path
        try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        let scenario = try ScenarioLoader.load(path: file)
        var logger = Logger(label: "test-fleet")
        logger.logLevel = .warning
        let result = try await RunGate.exclusive {
            try await FleetRunner(scenario: scenario, options: .init(scenarioFile: file, scenarioText: yaml, version: "test", logger: logger)).run()
        }
        let c = result.delivery
        #expect(result.devices.ready == 12)
        #expect(c.expected > 0 && c.delivered == c.expected && c.lost == 0 && c.misdelivered == 0 && c.leaks == 0, "\(c)")
        #expect(result.users.allSatisfy { $0.counts.expected > 0 }, "\(result.users.map { ($0.user, $0.counts.expected) })")
        #expect(result.rulesHeld, "\(result.thresholds.filter { !$0.passed })")
    }

    @Test("the same scenario against the reference backend finds nothing wrong")
    func referenceBackend() async throws {
        let metrics = LiveMetrics()
        let result = try await Self.run(Self.scenario(), metrics: metrics)
        #expect(result.devices.ready == 4)
        // The live exposition agrees with the report.
        let exposition = metrics.registry.emitToString()
        let sends = Int(result.counters["sends"] ?? 0)
        let secure = exposition.split(separator: "\n").first { $0.hasPrefix("pushfleet_sends_total{kind=\"secure\",result=\"ok\"}") }
        let plain = exposition.split(separator: "\n").first { $0.hasPrefix("pushfleet_sends_total{kind=\"plain\",result=\"ok\"}") }
        let secureCount = Int(secure?.split(separator: " ").last ?? "") ?? -1
        let plainCount = Int(plain?.split(separator: " ").last ?? "") ?? -1
        #expect(secureCount + plainCount == sends)
        #expect(exposition.contains("pushfleet_delivery_pairs{outcome=\"delivered\"} \(result.delivery.delivered)"))
        #expect(exposition.contains("pushfleet_devices{state=\"ready\"} 4"))
        #expect(exposition.contains("pushfleet_operation_duration_seconds_bucket{operation=\"delivery\""))
        #expect(result.delivery.expected > 0 && result.delivery.delivered == result.delivery.expected)
        #expect(result.delivery.misdelivered == 0 && result.delivery.lost == 0 && result.delivery.duplicates == 0)
        #expect(result.delivery.leaks == 0)
        #expect(result.rulesHeld)
        // Every report file renders from the result, and run.json round-trips.
        let files = try ReportFiles.render(result)
        #expect(files.map(\.name) == [
            "run.json", "summary.csv", "operations.csv", "users.csv", "timeseries.csv", "errors.csv", "incidents.csv", "junit.xml", "report.html",
        ])
        // report.html: self-contained, every chart present, numbers as in run.json.
        let html = String(decoding: files.first { $0.name == "report.html" }!.data, as: UTF8.self)
        for id in HTMLReport.chartIDs {
            #expect(html.contains("<svg id=\"\(id)\""), "chart \(id)")
        }
        #expect(!html.contains("<script") && !html.contains("src=") && !html.contains("<link") && !html.contains("url("))
        #expect(html.contains("<span class=\"verdict passed\" id=\"verdict\">PASSED</span>"))
        let c = result.delivery
        #expect(html.contains("<tr><td>all</td><td>\(c.expected)</td><td>\(c.delivered)</td><td>\(c.late)</td><td>\(c.lost)</td>"))
        let delivery = result.operations.first { $0.name == "delivery" && $0.measure == "corrected" }!
        #expect(html.contains("<td>delivery</td><td>corrected</td><td>\(delivery.count)</td>"))
        #expect(html.contains(String(format: "%.2f", delivery.p99Ms)))
        #expect(html.components(separatedBy: "class=\"series\"").count > 6)
        let decoded = try ReportFiles.decodeRunJSON(files[0].data)
        #expect(decoded.delivery == result.delivery)
        #expect(decoded.histograms["delivery"]?.count == result.histograms["delivery"]?.count)
        #expect(decoded.histograms["delivery"]?.percentile(99) == result.histograms["delivery"]?.percentile(99))
        let users = String(decoding: files[3].data, as: UTF8.self).split(separator: "\n")
        #expect(users.count == 5 && users[0].hasPrefix("user,devices,expected,delivered"))
    }

    @Test("own sockets from two source addresses: devices the service disconnects come back and miss nothing; departed ones leave")
    func perDeviceReconnect() async throws {
        let yaml = """
                name: reconnect
                seed: 9
                fleet:
                  users: 30
                  devices_per_user: 1
                  platforms: { apns: 1, fcm: 1 }
                  push_channel: per_device
                  departure: { share: 20%, at: 3s }
                  source_addresses: [127.0.0.2, 127.0.0.3]
                lifecycle: [login, register, connect, receive, fetch_secure]
                traffic:
                  - { kind: plain, rate: 30/s, duration: 4s }
                faults:
                  - { at: 1s, disconnect: 50% }
                deadline: 30s
                grace: 1s
                """
        let result = try await Self.run(yaml)
        #expect(result.operations.first { $0.name == "pns.admin" }.map { $0.count == 1 && $0.failures == 0 } == true)
        #expect(result.markers.contains { $0.label.hasPrefix("faults: disconnect") })
        #expect(result.markers.contains { $0.label.hasPrefix("departure") })
        #expect(result.devices.ready == 30 && result.devices.failed == 0)
        // Each device back on its socket renewed its registration, as an app does.
        let puts = result.operations.first { $0.name == "http.register.put" }?.count ?? 0
        #expect(puts >= 30 + 10, "\(puts) PUTs")
        // A device left offline keeps one held push; a second push to it would be lost.
        let c = result.delivery
        #expect(c.expected > 60 && c.delivered == c.expected && c.lost == 0 && c.late == 0)
        #expect(c.misdelivered == 0 && c.duplicates == 0)
    }

    static func expiringRegistrations(renewEvery: String?) -> String {
        """
        name: renewals
        seed: 21
        embedded: { registration_ttl: 1s }
        fleet:
          users: 10
          devices_per_user: 1
          platforms: { apns: 1, fcm: 1 }
          push_channel: per_device
        \(renewEvery.map { "  reregister_every: \($0)" } ?? "")
        lifecycle: [login, register, connect, receive]
        traffic:
          - { kind: plain, rate: 20/s, duration: 3s }
        deadline: \(renewEvery == nil ? "2s" : "30s")
        grace: 500ms
        thresholds:
          sends.late_start_ratio: []
        """
    }

    @Test("registrations the backend lets expire: without renewals pushes are lost and the run fails; renewed in time, none is lost")
    func renewals() async throws {
        let lapsed = try await Self.run(Self.expiringRegistrations(renewEvery: nil))
        #expect(lapsed.delivery.lost > 0, "\(lapsed.delivery)")
        #expect(!lapsed.passed)
        #expect(lapsed.thresholds.contains { $0.metric == "delivery.lost_ratio" && !$0.passed })

        let renewed = try await Self.run(Self.expiringRegistrations(renewEvery: "300ms"))
        let c = renewed.delivery
        #expect(c.expected > 50 && c.delivered == c.expected && c.lost == 0, "\(c)")
        #expect(renewed.rulesHeld, "\(renewed.thresholds.filter { !$0.passed })")
        // Every device renewed several times, each a PUT of its cached id.
        let puts = renewed.operations.first { $0.name == "http.register.put" }?.count ?? 0
        #expect(puts >= 10 * 5, "\(puts) PUTs")
        #expect(renewed.operations.first { $0.name == "http.register.post" }?.count == 10)
    }

    @Test("a renewal that finds the registration gone (410) makes a new one, and pushes reach the device again")
    func renewalAfterLoss() async throws {
        let result = try await Self.run(Self.expiringRegistrations(renewEvery: "1500ms"))
        let renewedAfter410 = result.errors.first { $0.errorClass == "register:renewed_after_410" }?.count ?? 0
        #expect(renewedAfter410 >= 10, "\(result.errors.map { ($0.errorClass, $0.count) })")
        #expect((result.operations.first { $0.name == "http.register.post" }?.count ?? 0) >= 20)
        // Lapses between expiry and renewal lose pushes; after each renewal they arrive again.
        let c = result.delivery
        #expect(c.lost > 0 && c.delivered > c.lost, "\(c)")
    }

    static func restartScenario(store: String) -> String {
        """
        name: restart-\(store)
        seed: 8
        embedded: { store: \(store) }
        fleet:
          users: 10
          platforms: { apns: 1, fcm: 1 }
          push_channel: per_device
          reregister_every: 400ms
        lifecycle: [login, register, connect, receive, fetch_secure]
        traffic:
          - { kind: plain, rate: 20/s, duration: 3s }
          - { kind: secure, rate: 10/s, duration: 3s }
        faults:
          - { at: 1s, backend: restart, down_for: 300ms }
        deadline: \(store == "sqlite" ? "30s" : "5s")
        grace: 500ms
        thresholds:
          # Sends made while the backend is down fail, as they should, and a push that arrives
          # while it is down cannot be fetched (unverified); only the deliveries are judged.
          sends.failed_ratio: []
          delivery.unverified: []
          delivery.indeterminate_ratio: []
          sends.late_start_ratio: []
        """
    }

    @Test("the backend restarted mid-run: with SQLite nothing is lost; with memory the devices register again and the losses fail the run")
    func backendRestart() async throws {
        let persistent = try await Self.run(Self.restartScenario(store: "sqlite"))
        #expect(persistent.markers.contains { $0.label.hasPrefix("backend stops for 300ms") })
        #expect(persistent.markers.contains { $0.label == "faults: backend restarted" }, "\(persistent.markers.map(\.label))")
        // Sends made while the backend was down failed (about 9 of them in its 300 ms).
        #expect(persistent.counters["sends.failed"] ?? 0 > 0, "\(persistent.counters)")
        let p = persistent.delivery
        #expect(p.lost == 0 && p.misdelivered == 0 && p.delivered > 0, "\(p)")
        #expect(!persistent.errors.contains { $0.errorClass == "register:renewed_after_410" })
        #expect(persistent.rulesHeld, "\(persistent.thresholds.filter { !$0.passed })")

        let volatile = try await Self.run(Self.restartScenario(store: "memory"))
        let v = volatile.delivery
        #expect(volatile.errors.first { $0.errorClass == "register:renewed_after_410" }?.count ?? 0 >= 10, "\(volatile.errors.map(\.errorClass))")
        #expect(v.lost > 0 && v.misdelivered == 0 && v.delivered > v.lost, "\(v)")
        #expect(!volatile.passed && volatile.thresholds.contains { $0.metric == "delivery.lost_ratio" && !$0.passed })
    }

    @Test("a backend that goes down mid-run and stays down fails the run with the reason named, and the run still ends on time")
    func backendGoneNeverPasses() async throws {
        let yaml = """
            name: backend-gone
            seed: 6
            fleet: { users: 6, platforms: { apns: 1, fcm: 1 } }
            lifecycle: [login, register, connect, receive, fetch_secure]
            traffic:
              - { kind: plain, rate: 20/s, duration: 3s }
              - { kind: secure, rate: 10/s, duration: 3s }
            faults:
              - { at: 1s, backend: restart, down_for: 1h }
            deadline: 2s
            grace: 500ms
            """
        let result = try await Self.run(yaml)
        // Three seconds of traffic: a run that waited out the hour's down time would show it.
        #expect(result.info.durationSeconds < 120, "the run waited for the backend: \(result.info.durationSeconds) s")
        #expect(!result.passed)
        let failedSends = result.thresholds.first { $0.metric == "sends.failed_ratio" }
        #expect(failedSends?.origin == "default" && failedSends?.passed == false, "\(result.thresholds)")
        #expect(result.errors.contains { $0.errorClass.hasPrefix("send:") && $0.count > 0 }, "\(result.errors.map(\.errorClass))")
        #expect(result.markers.contains { $0.label == "faults: backend still down when the traffic ended" }, "\(result.markers.map(\.label))")
        // Nothing that reached a device is judged wrong because the backend went away.
        #expect(result.delivery.misdelivered == 0 && result.delivery.stale == 0 && result.delivery.sentToDeadToken == 0, "\(result.delivery)")
    }

    @Test("the push gateway gone: devices retry with backoff, not in a tight loop, and all come back when it returns")
    func gatewayGoneBackoff() async throws {
        try await RunGate.exclusive { try await gatewayGone() }
    }

    private func gatewayGone() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let (proxy, port) = try await TCPProxy.start(upstreamPort: try #require(URL(string: system.pushService)?.port))
            let devices = 20
            let yaml = """
                name: gateway-gone
                seed: 12
                target: { backend: "\(system.backend)", pns: "http://127.0.0.1:\(port)" }
                fleet: { users: \(devices), platforms: { apns: 1 }, push_channel: per_device }
                lifecycle: [login, register, connect, receive]
                traffic:
                  - { kind: plain, rate: 5/s, duration: 30s }
                deadline: 5s
                grace: 1s
                """
            // The gateway goes once every device is set up and the traffic flows.
            let ready = Readiness<Void>()
            let run = Task {
                defer { ready.fail(CancellationError()) }
                return try await Self.runUngated(yaml, beforeTraffic: { ready.succeed(()) })
            }
            try await ready.value()
            let connected = proxy.connectionsWhileUp
            try await Task.sleep(for: .seconds(1))
            proxy.goDown()
            let down = 6.0
            try await Task.sleep(for: .seconds(down))
            let attempts = proxy.attemptsWhileDown
            proxy.goUp()
            // The longest wait a device can be in when the gateway returns is the backoff's cap.
            for _ in 0..<500 where proxy.connectionsWhileUp < connected + devices { try await Task.sleep(for: .milliseconds(50)) }
            let result = try await run.value
            await proxy.stop()
            // Without backoff a device came back about 5 times a second; with it, about once.
            let rate = Double(attempts) / Double(devices) / down
            #expect(attempts >= devices && rate < 2, "\(attempts) attempts by \(devices) devices in \(down) s")
            #expect(result.devices.ready == devices && proxy.connectionsWhileUp >= connected + devices, "\(proxy.connectionsWhileUp) connections; devices \(result.devices); errors \(result.errors.map { ($0.errorClass, $0.count) }); markers \(result.markers.map { ($0.label, $0.second) }); errors by second \(result.timeseries.enumerated().filter { $0.element.errors > 0 }.map { ($0.offset, $0.element.errorsByClass ?? [:]) })")
            #expect(result.errors.contains { $0.errorClass.hasPrefix("connect:") }, "\(result.errors.map(\.errorClass))")
        }
    }

    @Test("a backend slower than the scenario asks: sends dropped at max_in_flight fail the run with no thresholds of its own")
    func overloadNeverPasses() async throws {
        let yaml = """
            name: overload
            seed: 4
            fleet: { users: 4, platforms: { apns: 1 } }
            lifecycle: [login, register, connect, receive]
            traffic:
              - { kind: plain, platforms: [apns], rate: 100/s, duration: 2s, max_in_flight: 2 }
            faults:
              - { at: 0s, backend_latency: { send: { fixed: 100ms } } }
            deadline: 2s
            grace: 500ms
            """
        let result = try await Self.run(yaml)
        let dropped = result.thresholds.first { $0.metric == "sends.dropped_ratio" }
        #expect(dropped?.origin == "default" && dropped?.passed == false, "\(result.thresholds)")
        #expect(!result.passed)
        // What was sent was delivered: the failure is the load that could not be offered.
        #expect(result.delivery.lost == 0 && result.delivery.delivered == result.delivery.expected, "\(result.delivery)")
        // The report's timeline says when the backend slowed down and what was dropped from then.
        let html = String(decoding: try ReportFiles.render(result).first { $0.name == "report.html" }!.data, as: UTF8.self)
        let timeline = try #require(html.components(separatedBy: "<table id=\"timeline-table\">").dropFirst().first?.components(separatedBy: "</table>").first)
        let row = try #require(timeline.components(separatedBy: "<tr>").first { $0.contains("faults: backend send latency 100ms") })
        let cells = row.components(separatedBy: "<td>").dropFirst().map { $0.components(separatedBy: "</td>")[0] }
        let droppedSends = result.timeseries.reduce(0) { $0 + $1.sendsDropped }
        #expect(droppedSends > 0 && cells.count == 9 && Int(cells[4]) == droppedSends, "\(cells) vs \(droppedSends)")
    }

    @Test("the push service declaring tokens dead: the reference backend drops them, nothing counts as lost, nothing went to a dead token")
    func unregisteredFeedback() async throws {
        let yaml = """
            name: dead-tokens
            seed: 11
            fleet:
              users: 12
              devices_per_user: 2
              platforms: { apns: 1, fcm: 1, wns: 1 }
            lifecycle: [login, register, connect, receive, fetch_secure]
            traffic:
              - { kind: plain, rate: 20/s, duration: 2s }
              - { kind: secure, rate: 10/s, duration: 2s }
            faults:
              - { at: 0s, pns: { unregistered_ratio: 30% } }
            deadline: 30s
            grace: 1s
            thresholds:
              delivery.indeterminate_ratio: []
              sends.late_start_ratio: []
            """
        let result = try await Self.run(yaml)
        let c = result.delivery
        #expect(c.unregistered > 0, "\(c)")
        #expect(
            c.lost == 0 && c.sentToDeadToken == 0 && c.misdelivered == 0 && c.unverified == 0 && c.stale == 0,
            "\(c)\n\((result.incidents ?? []).map { "\($0)" }.joined(separator: "\n"))\n\(result.errors)"
        )
        #expect(c.delivered > 0 && c.delivered + c.unregistered >= c.expected, "\(c)")
        #expect(result.rulesHeld, "\(result.thresholds.filter { !$0.passed })")
    }

    @Test("rich pushes pass judged by the content served, and by the bytes echoed")
    func richModes() async throws {
        for mode in ["served", "echo"] {
            let yaml = """
                name: rich-\(mode)
                seed: 5
                fleet:
                  users: 6
                  devices_per_user: 2
                  platforms: { apns: 1, fcm: 1, wns: 1 }
                lifecycle: [login, register, connect, receive, fetch_rich]
                traffic:
                  - { kind: rich, rate: 10/s, duration: 1s }
                rich_content: \(mode)
                # Beside CI's release build and fuzzers a connect has taken over 10 s.
                timeouts: { login: 60s, register: 60s, connect: 60s, fetch: 60s }
                deadline: 30s
                grace: 1s
                thresholds:
                  sends.late_start_ratio: []
                """
            let result = try await Self.run(yaml)
            let c = result.delivery
            #expect(c.expected > 0 && c.delivered == c.expected && c.misdelivered == 0 && c.unverified == 0, "\(mode): \(c)")
            #expect(result.rulesHeld, "\(mode): \(result.thresholds.filter { !$0.passed })")
        }
    }
}
