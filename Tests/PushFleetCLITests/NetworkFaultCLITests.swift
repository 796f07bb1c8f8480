import Foundation
import PushFleetCore
import PushFleetTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Real packet loss and silent partitions on the phones' links, made by the kernel's packet
/// filter on the run's own loopback addresses. These need root (or CAP_NET_ADMIN) and nft.
/// One at a time: each is a whole run of up to 100 devices, and the suite runs beside the rest.
@Suite("Network faults", .serialized)
struct NetworkFaultCLITests {
    static var nft: String? { ["/usr/sbin/nft", "/sbin/nft"].first { FileManager.default.isExecutableFile(atPath: $0) } }
    /// Root, nft, and asked for: each test is a whole run of up to 100 devices for up to a minute,
    /// which the rest of the suite, run all at once, should not have beside it; `.ci/run` runs
    /// them after the suite with `PUSHFLEET_NETWORK_FAULT_TESTS=1`.
    static var available: Bool {
        geteuid() == 0 && nft != nil && ProcessInfo.processInfo.environment["PUSHFLEET_NETWORK_FAULT_TESTS"] == "1"
    }

    /// A quarter of 100 phones (APNs and FCM) cut off silently for 5 s; devices ping every 500 ms
    /// and give up after 1.5 s of silence; the gateway pings every second.
    static let partition = """
        name: partition
        seed: 11
        fleet:
          users: 100
          platforms: { apns: 1, fcm: 1 }
          arrival: { rate: 500/s }
        lifecycle: [login, register, connect, receive, fetch_secure]
        # Connects take seconds on a machine loaded by the suite, the release build and the fuzzers.
        timeouts: { connect: 10s }
        traffic:
          - { kind: secure, rate: 20/s, duration: 12s }
        deadline: 2s
        grace: 8s
        network:
          keepalive: { ping: 500ms, dead_after: 1500ms }
          gateway_ping: 1s
          faults:
            - { link: phone, at: 3s, for: 5s, share: 25%, partition: both }
        thresholds:
          delivery.misdelivered: ["count == 0"]
          delivery.lost_ratio: []
          delivery.late_ratio: []
          # Passes on a machine loaded by the rest of the suite too (CLITests.scenario).
          sends.late_start_ratio: []
        """

    /// The run's run.json under `out/`.
    static func runJSON(_ directory: URL) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("out/run.json"))) as? [String: Any] ?? [:]
    }

    static func tables() async throws -> [String] {
        guard let nft = nft else { return [] }
        let listing = try await offPool { () -> String in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: nft)
            process.arguments = ["list", "tables", "inet"]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return String(decoding: data, as: UTF8.self)
        }
        return listing.split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) }
    }

    @Test(
        "a silent partition: exactly its devices find their sockets dead within the keepalive, reconnect after the heal, get what was held, and the rules are gone after the run",
        .enabled(if: available, "needs root, nftables' nft and PUSHFLEET_NETWORK_FAULT_TESTS=1 (.ci/run sets it)"), .timeLimit(.minutes(3))
    )
    func partitionRun() async throws {
        let directory = try CLITests.temporaryDirectory()
        try Self.partition.write(to: directory.appendingPathComponent("p.yaml"), atomically: true, encoding: .utf8)
        let (process, pipe) = try CLITests.launch(["run", "p.yaml", "--out", "out"], in: directory)
        let pid = process.processIdentifier
        let (data, status) = try await offPool {
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (data, process.terminationStatus)
        }
        let output = String(decoding: data, as: UTF8.self)
        #expect(status == 0, "\(output)")
        #expect(try await Self.tables().allSatisfy { !$0.hasPrefix("pushfleet_\(pid)_") }, "the run's table is removed")

        let run = try Self.runJSON(directory)
        let fault = Scenario.NetworkFault(link: .phone, kind: .partition(.both), at: .seconds(3), duration: .seconds(5), share: 0.25)
        let cut = NetworkFaultPlan(faults: [fault], devices: 100, seed: 11, runID: "any", pid: 1).members[0]
        #expect((10...40).contains(cut.count), "\(cut.count)")
        let operations = run["operations"] as? [[String: Any]] ?? []
        func operation(_ name: String) -> [String: Any]? { operations.first { $0["name"] as? String == name } }
        let notice = try #require(operation("phone.dead_link_notice"), "\(operations.map { $0["name"] ?? "" })")
        // Each cut-off device gives its socket up once; no other device does.
        #expect(notice["count"] as? Int == cut.count, "\(notice)")
        #expect(operation("phone.dead_link")?["count"] as? Int == cut.count)
        // Silence is counted from the last frame heard, which may precede the cut by up to a
        // ping: dead_after after it at most, plus a loaded machine's late timers.
        let slowest = try #require(notice["maxMs"] as? Double)
        #expect(slowest <= 1500 + 500 + 2000, "\(notice)")
        #expect((notice["minMs"] as? Double ?? 0) >= 300, "\(notice)")
        // The gateway's side, as each device's next subscribe tells it: every cut socket closed
        // within the partition, an unanswered ping a period after the last answered one at most.
        let gateway = try #require(operation("gateway.dead_link_notice"), "\(operations.map { $0["name"] ?? "" })")
        #expect(gateway["count"] as? Int == cut.count && gateway["failures"] as? Int == 0, "\(gateway)")
        #expect((gateway["maxMs"] as? Double ?? .infinity) <= 2 * 1000 + 2000, "\(gateway)")

        let delivery = run["delivery"] as? [String: Int] ?? [:]
        let devices = run["devices"] as? [String: Any] ?? [:]
        #expect(devices["failed"] as? Int == 0 && devices["ready"] as? Int == 100, "\(devices)")
        #expect(delivery["misdelivered"] == 0 && delivery["duplicates"] == 0 && delivery["leaks"] == 0, "\(delivery)")
        #expect((delivery["late"] ?? 0) > 0, "pushes held through the partition arrive after the heal: \(delivery)")
        // Every push held through the partition is delivered late or replaced by a newer one (APNs
        // keeps the newest): the gateway hands back what a dead socket swallowed unacknowledged.
        #expect(delivery["lost"] == 0, "\(delivery)")
        let settled = ["delivered", "late", "replaced", "indeterminate"].reduce(0) { $0 + (delivery[$1] ?? 0) }
        #expect(settled == delivery["expected"], "\(delivery)")
        let markers = (run["markers"] as? [[String: Any]] ?? []).compactMap { $0["label"] as? String }
        #expect(markers.contains("network: phone partition both, 25% of devices begins"), "\(markers)")
        #expect(markers.contains("network: phone partition both, 25% of devices ends"), "\(markers)")

        // The window's own ledger: the sends that started in it, to the devices it cut off.
        let windows = run["networkFaults"] as? [[String: Any]] ?? []
        try #require(windows.count == 1, "\(windows)")
        let window = windows[0]
        #expect(window["fault"] as? Int == 1 && window["devices"] as? Int == cut.count, "\(window)")
        let inWindow = window["delivery"] as? [String: Int] ?? [:]
        #expect((inWindow["expected"] ?? 0) > 0 && inWindow["lost"] == 0 && inWindow["duplicates"] == 0, "\(inWindow)")
        #expect((inWindow["late"] ?? 0) + (inWindow["replaced"] ?? 0) > 0, "\(inWindow)")
        // What each platform promises: APNs hands over only the newest push held for a device
        // (the rest replaced), FCM every one of them (none replaced).
        let byPlatform = window["deliveryByPlatform"] as? [String: [String: Int]] ?? [:]
        let apns = byPlatform["apns"] ?? [:]
        let fcm = byPlatform["fcm"] ?? [:]
        #expect((apns["replaced"] ?? 0) > 0 && apns["lost"] == 0, "\(apns)")
        #expect((apns["late"] ?? 0) <= cut.count, "at most one held push per APNs device: \(apns)")
        #expect((fcm["expected"] ?? 0) > 0 && fcm["replaced"] == 0 && fcm["lost"] == 0, "\(fcm)")
        #expect(["delivered", "late", "replaced", "indeterminate"].reduce(0) { $0 + (inWindow[$1] ?? 0) } == inWindow["expected"], "\(inWindow)")
        #expect(output.contains("network faults (sends that started in each window, to its devices):"), "\(output)")
        #expect(!output.contains("failing pairs fall in window"), "\(output)")
        let html = try String(contentsOf: directory.appendingPathComponent("out/report.html"), encoding: .utf8)
        #expect(html.contains("id=\"network-faults-table\"") && html.contains("class=\"band\""))
    }

    @Test(
        "a partition in a run of two shards: shard 0 owns the rules, each shard its devices, and the merge judges the window over both",
        .enabled(if: available, "needs root, nftables' nft and PUSHFLEET_NETWORK_FAULT_TESTS=1 (.ci/run sets it)"), .timeLimit(.minutes(4))
    )
    func shardedWindow() async throws {
        let directory = try CLITests.temporaryDirectory()
        try Self.partition.write(to: directory.appendingPathComponent("p.yaml"), atomically: true, encoding: .utf8)
        let outcome = try await ChildProcess.run(
            CLITests.binary, ["shards", directory.appendingPathComponent("p.yaml").path, "--local", "2", "--out", directory.appendingPathComponent("run").path, "--quiet"],
            limit: .seconds(200)
        )
        #expect(outcome.status == 0, "\(outcome.text)")
        let data = try Data(contentsOf: directory.appendingPathComponent("run/merged/run.json"))
        let run = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        let fault = Scenario.NetworkFault(link: .phone, kind: .partition(.both), at: .seconds(3), duration: .seconds(5), share: 0.25)
        let cut = NetworkFaultPlan(faults: [fault], devices: 100, seed: 11, runID: "any", pid: 1).members[0]
        let windows = run["networkFaults"] as? [[String: Any]] ?? []
        try #require(windows.count == 1, "the merge judges the window: \(run.keys.sorted())")
        #expect(windows[0]["devices"] as? Int == cut.count, "\(windows[0])")
        let inWindow = windows[0]["delivery"] as? [String: Int] ?? [:]
        #expect((inWindow["expected"] ?? 0) > 0 && inWindow["lost"] == 0 && inWindow["duplicates"] == 0, "\(inWindow)")
        #expect((inWindow["late"] ?? 0) + (inWindow["replaced"] ?? 0) > 0, "held through the partition: \(inWindow)")
        let operations = run["operations"] as? [[String: Any]] ?? []
        let notice = operations.first { $0["name"] as? String == "phone.dead_link_notice" }
        #expect(notice?["count"] as? Int == cut.count, "every cut device, whichever shard held it: \(notice ?? [:])")
        let left = try await Self.tables().compactMap(NetworkFaultPlan.pid(ofTable:)).filter { kill($0, 0) != 0 }
        #expect(left.isEmpty, "tables of shards that ended: \(left)")
    }

    @Test(
        "devices that give dead sockets up without acknowledging pushes lose what the sockets swallowed: the run fails, names the window, and says how to replay it alone",
        .enabled(if: available, "needs root, nftables' nft and PUSHFLEET_NETWORK_FAULT_TESTS=1 (.ci/run sets it)"), .timeLimit(.minutes(3))
    )
    func failingWindowNamed() async throws {
        let directory = try CLITests.temporaryDirectory()
        let yaml = Self.partition.replacingOccurrences(of: "dead_after: 1500ms }", with: "dead_after: 1500ms, acks: false }")
            .replacingOccurrences(of: "delivery.lost_ratio: []", with: "delivery.lost: [\"count == 0\"]")
        try #require(yaml != Self.partition)
        try yaml.write(to: directory.appendingPathComponent("p.yaml"), atomically: true, encoding: .utf8)
        let outcome = try await CLITests.run(["run", "p.yaml", "--out", "out", "--quiet"], in: directory)
        #expect(outcome.status == 99, "a threshold failed: \(outcome.output)")
        let run = try Self.runJSON(directory)
        let window = (run["networkFaults"] as? [[String: Any]])?.first?["delivery"] as? [String: Int] ?? [:]
        #expect((window["lost"] ?? 0) > 0, "\(window)")
        #expect(outcome.output.contains("failing pairs fall in window #1 ("), "\(outcome.output)")
        #expect(outcome.output.contains("replay one alone: pushfleet run p.yaml --only-fault 1 --seed 11"), "\(outcome.output)")
        let html = try String(contentsOf: directory.appendingPathComponent("out/report.html"), encoding: .utf8)
        #expect(html.contains("id=\"network-faults-shrink\""))
        let beyond = try await CLITests.run(["run", "p.yaml", "--only-fault", "2"], in: directory)
        #expect(beyond.status == 2 && beyond.output.contains("--only-fault 2: give 1 to 1, the place of a fault in network.faults"), "\(beyond.output)")
    }

    @Test(
        "a lossy, slow phone link (5% loss, 200 ms ± 100 ms): every push still arrives, and the window's device hop shows the cost",
        .enabled(if: available, "needs root, nftables' nft and PUSHFLEET_NETWORK_FAULT_TESTS=1 (.ci/run sets it)"), .timeLimit(.minutes(3))
    )
    func lossyLink() async throws {
        let directory = try CLITests.temporaryDirectory()
        let yaml = """
            name: lossy
            seed: 7
            fleet:
              users: 60
              platforms: { apns: 1, fcm: 1 }
              arrival: { rate: 400/s }
            lifecycle: [login, register, connect, receive, fetch_secure]
            traffic:
              - { kind: secure, rate: 20/s, duration: 14s }
            deadline: 5s
            grace: 5s
            network:
              keepalive: { ping: 2s, dead_after: 10s }
              faults:
                - { link: phone, at: 3s, for: 8s, loss: 5% }
                - { link: phone, at: 3s, for: 8s, latency: 200ms, jitter: 100ms }
            thresholds:
              delivery.lost: ["count == 0"]
              delivery.late: ["count == 0"]
              sends.late_start_ratio: []
            """
        try yaml.write(to: directory.appendingPathComponent("l.yaml"), atomically: true, encoding: .utf8)
        let outcome = try await CLITests.run(["run", "l.yaml", "--out", "out", "--quiet"], in: directory)
        #expect(outcome.status == 0, "\(outcome.output)")
        let run = try Self.runJSON(directory)
        let delivery = run["delivery"] as? [String: Int] ?? [:]
        #expect(delivery["delivered"] == delivery["expected"] && (delivery["expected"] ?? 0) > 0, "\(delivery)")
        let windows = run["networkFaults"] as? [[String: Any]] ?? []
        try #require(windows.count == 2, "\(windows)")
        for window in windows {
            let counts = window["delivery"] as? [String: Int] ?? [:]
            #expect(counts["delivered"] == counts["expected"] && (counts["expected"] ?? 0) > 0, "\(window)")
            let device = (window["hopP50Ms"] as? [String: Double])?["device"] ?? 0
            // Each push waits 100–300 ms in the proxy, and longer when a packet was lost.
            #expect(device >= 100 && device <= 1000, "\(window)")
        }
        let markers = (run["markers"] as? [[String: Any]] ?? []).compactMap { $0["label"] as? String }
        #expect(markers.contains("network: phone loss 5%, 100% of devices begins"), "\(markers)")
        #expect(!markers.contains { $0.contains("could not be changed") }, "\(markers)")
        #expect((run["errors"] as? [[String: Any]] ?? []).isEmpty, "\(run["errors"] ?? "")")
    }

    @Test(
        "a fault the kernel refuses mid-run (its table removed from outside) stops the run, marked so: it never passes as if the fault had happened",
        .enabled(if: available, "needs root, nftables' nft and PUSHFLEET_NETWORK_FAULT_TESTS=1 (.ci/run sets it)"), .timeLimit(.minutes(3))
    )
    func refusedFaultStops() async throws {
        let directory = try CLITests.temporaryDirectory()
        try Self.partition.write(to: directory.appendingPathComponent("p.yaml"), atomically: true, encoding: .utf8)
        let (process, pipe) = try CLITests.launch(["run", "p.yaml", "--out", "out", "--quiet"], in: directory)
        let prefix = "pushfleet_\(process.processIdentifier)_"
        var table: String?
        for _ in 0..<200 where table == nil {
            try await Task.sleep(for: .milliseconds(100))
            table = try await Self.tables().first { $0.hasPrefix(prefix) }
        }
        let name = try #require(table, "the run installed its table")
        _ = try await offPool { () -> Int32 in
            let nft = Process()
            nft.executableURL = URL(fileURLWithPath: Self.nft!)
            nft.arguments = ["delete", "table", "inet", name]
            try nft.run()
            nft.waitUntilExit()
            return nft.terminationStatus
        }
        let (data, status) = try await offPool {
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (data, process.terminationStatus)
        }
        let output = String(decoding: data, as: UTF8.self)
        #expect(status == 1, "aborted: \(output)")
        #expect(output.contains("network faults could not be changed"), "\(output)")
        let run = try Self.runJSON(directory)
        #expect((run["info"] as? [String: Any])?["aborted"] as? Bool == true)
        #expect((run["errors"] as? [[String: Any]] ?? []).contains { $0["errorClass"] as? String == "network.faults:nft_refused" })
    }

    @Test(
        "a run killed outright leaves its table, and the next run's start removes it",
        .enabled(if: available, "needs root, nftables' nft and PUSHFLEET_NETWORK_FAULT_TESTS=1 (.ci/run sets it)"), .timeLimit(.minutes(3))
    )
    func killedRunSwept() async throws {
        let directory = try CLITests.temporaryDirectory()
        try Self.partition.write(to: directory.appendingPathComponent("p.yaml"), atomically: true, encoding: .utf8)
        try CLITests.scenario().write(to: directory.appendingPathComponent("plain.yaml"), atomically: true, encoding: .utf8)
        let (process, _) = try CLITests.launch(["run", "p.yaml", "--out", "out"], in: directory)
        let prefix = "pushfleet_\(process.processIdentifier)_"
        var installed = false
        for _ in 0..<200 where !installed {
            try await Task.sleep(for: .milliseconds(100))
            installed = try await Self.tables().contains { $0.hasPrefix(prefix) }
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try #require(installed, "the run installed its table")
        // SIGKILL leaves it behind; a run started meanwhile by another test may sweep it first.
        let next = try await CLITests.run(["run", "plain.yaml", "--out", "plain"], in: directory)
        #expect(next.status == 0, "\(next.output)")
        #expect(try await Self.tables().allSatisfy { !$0.hasPrefix(prefix) }, "the next run removed it")
    }

    @Test(
        "without root, validate and run say what network faults need and exit 2",
        .enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root to become nobody")
    )
    func unprivileged() async throws {
        let directory = try CLITests.temporaryDirectory()
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        try Self.partition.write(to: directory.appendingPathComponent("p.yaml"), atomically: true, encoding: .utf8)
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", CLITests.binary]
        for command in ["validate", "run"] {
            let outcome = try await CLITests.run(asNobody + [command, "p.yaml"], in: directory, executable: "/usr/bin/setpriv")
            #expect(outcome.status == 2, "\(command): \(outcome.output)")
            #expect(outcome.output.contains("network faults need the kernel's packet filter"), "\(command): \(outcome.output)")
            #expect(outcome.output.contains("neither root nor holds CAP_NET_ADMIN"), "\(command): \(outcome.output)")
        }
    }
}
