import Foundation
import PushFleetLedger
import PushFleetReport
import PushFleetResults
import PushFleetTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// pushfleet's push service held back by the machine, behind a backend that is not: the run must
/// name pushfleet's push service as its limit, never fail the backend for the wait.
@Suite("A confined push service")
struct ConfinedPushServiceCLITests {
    /// A CPU quota of its own for the push service: a cgroup under the cpu controller, v1
    /// (`cpu.cfs_quota_us`) or v2 (`cpu.max`); nil where this process may not make one.
    struct Quota {
        let directory: String

        /// cgroup v1 (its `cpu.cfs_*` files) or v2 (`cpu.max`).
        let v1: Bool

        init?(percentOfACore percent: Int) {
            let name = "pushfleet-test-\(UUID().uuidString)"
            let manager = FileManager.default
            if manager.fileExists(atPath: "/sys/fs/cgroup/cpu/cpu.cfs_quota_us") {
                directory = "/sys/fs/cgroup/cpu/\(name)"
                v1 = true
            } else if (try? String(contentsOfFile: "/sys/fs/cgroup/cgroup.subtree_control", encoding: .utf8))?.contains("cpu") == true {
                directory = "/sys/fs/cgroup/\(name)"
                v1 = false
            } else {
                return nil
            }
            guard (try? manager.createDirectory(atPath: directory, withIntermediateDirectories: false)) != nil else { return nil }
            guard limit(percentOfACore: percent) else {
                remove()
                return nil
            }
        }

        /// Sets the group's quota, per 100 ms period.
        func limit(percentOfACore percent: Int) -> Bool {
            if v1 {
                return Self.write("100000", to: "\(directory)/cpu.cfs_period_us") && Self.write("\(percent * 1_000)", to: "\(directory)/cpu.cfs_quota_us")
            }
            return Self.write("\(percent * 1_000) 100000", to: "\(directory)/cpu.max")
        }

        static var available: Bool {
            guard let probe = Quota(percentOfACore: 100) else { return false }
            probe.remove()
            return true
        }

        /// A shell command that joins the group and becomes `command`.
        func running(_ command: [String]) -> [String] {
            ["sh", "-c", "echo $$ > \(directory)/cgroup.procs && exec \"$@\"", "sh"] + command
        }

        /// After its processes have ended.
        func remove() { rmdir(directory) }

        private static func write(_ text: String, to path: String) -> Bool {
            (try? text.write(toFile: path, atomically: false, encoding: .utf8)) != nil
        }
    }

    /// Starts `command` and returns it once it printed a line starting with `label`, with that
    /// line's URL.
    static func start(_ command: [String], in directory: URL, url label: String) async throws -> (Process, String) {
        let (process, pipe) = try CLITests.launch(command, in: directory, executable: "/usr/bin/env")
        let output = ServeHubCLITests.OutputCollector(pipe)
        let deadline = ContinuousClock.now + .seconds(120)
        while true {
            if let url = output.text.split(separator: "\n").first(where: { $0.hasPrefix(label) })?.split(separator: " ").first(where: { $0.hasPrefix("http://") }) {
                return (process, String(url))
            }
            guard process.isRunning, ContinuousClock.now < deadline else {
                process.terminate()
                throw ServeHubCLITests.CLIFailure(description: "no '\(label)' line: \(output.text)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The push service runs under a CPU quota of 2% of a core once it has started: the debug
    /// build's push service spends a few hundred microseconds a push, so at 200 pushes a second it
    /// wants several times its quota, even when a loaded machine lets the fleet offer only part of
    /// that rate. The backend, in a process of its own, is not held back. Its loops run a few percent
    /// of the time, so neither a busy loop nor a busy process is seen: what shows is the time
    /// they waited for a core and, with a 100 ms quota period, their late timer checks.
    @Test(
        "a push service starved of CPU behind a fast backend: the run is inconclusive, naming pushfleet's push service, and exits 3",
        .enabled(if: Quota.available, "making a cgroup with a CPU quota is not allowed here")
    )
    func starvedPushService() async throws {
        let directory = try CLITests.temporaryDirectory()
        let quota = try #require(Quota(percentOfACore: 100))
        defer { quota.remove() }
        try await ConfinedServers.with(quota: quota, in: directory) { servers in
            let (backendURL, pushURL) = (servers.backendURL, servers.pushURL)
            let scenario = """
                name: confined
                target: { backend: \(backendURL), pns: \(pushURL) }
                fleet: { users: 20, platforms: { apns: 1 }, push_channel: per_device }
                lifecycle: [login, register, connect, receive]
                traffic:
                  - { kind: plain, rate: 200/s, duration: 4s }
                deadline: 5s
                grace: 1s
                """
            try Data(scenario.utf8).write(to: directory.appendingPathComponent("confined.yaml"))
            let run = try await CLITests.run(["run", "confined.yaml", "--out", "report", "--quiet"], in: directory)
            let result = try ReportFiles.decodeRunJSON(Data(contentsOf: directory.appendingPathComponent("report/run.json")))
            let limits = result.generator?.limits ?? []
            #expect(run.status == 3, "exit \(run.status): \(run.output.suffix(2_000))")
            // Starved (its loops' wait), behind (their late checks) or unresponsive (no answer as the
            // traffic ended): whichever the machine shows, it is pushfleet's push service.
            #expect(limits.contains { $0.hasPrefix("push service") }, "\(limits); \(String(describing: result.generator?.pushService))")
            if let load = result.generator?.pushService {
                // Running a few percent of the time, its loops wanted a core for most of it.
                #expect(load.busiestLoopShare < 0.1 && (load.busiestLoopDemand ?? 0) >= 0.5, "\(load)")
            }
            #expect(result.inconclusive)
            #expect(result.delivery.misdelivered == 0)
        }
    }

    /// The push service in `quota`, the backend beside it in a process of its own.
    struct ConfinedServers {
        let pushService: Process
        let backend: Process
        let pushURL: String
        let backendURL: String

        init(quota: Quota, in directory: URL) async throws {
            let (pushService, pushURL) = try await ConfinedPushServiceCLITests.start(
                quota.running([CLITests.binary, "serve", "--backend-listen", "127.0.0.1:0", "--pns-listen", "127.0.0.1:0", "--admin-auth", "off", "--log-level", "warning"]),
                in: directory, url: "push service:"
            )
            do {
                (backend, backendURL) = try await ConfinedPushServiceCLITests.start(
                    [CLITests.binary, "serve", "--backend-listen", "127.0.0.1:0", "--pns-url", pushURL, "--log-level", "warning"], in: directory, url: "backend:"
                )
            } catch {
                await Self.stop([pushService])
                throw error
            }
            self.pushService = pushService
            self.pushURL = pushURL
        }

        /// Runs `body` with the servers up, and stops them however it ends.
        static func with(quota: Quota, in directory: URL, _ body: (ConfinedServers) async throws -> Void) async throws {
            let servers = try await ConfinedServers(quota: quota, in: directory)
            // Started at a full core, which keeps its start short; starved from here on.
            guard quota.limit(percentOfACore: 2) else {
                await stop([servers.backend, servers.pushService])
                throw ServeHubCLITests.CLIFailure(description: "the push service's CPU quota could not be lowered")
            }
            let outcome: Result<Void, any Error>
            do {
                try await body(servers)
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            // A full core again, so that it stops in moments.
            _ = quota.limit(percentOfACore: 100)
            await stop([servers.backend, servers.pushService])
            try outcome.get()
        }

        /// Waits without holding a thread of the test pool: a push service held to a few percent
        /// of a core takes seconds to stop, and `waitUntilExit()` in two such tests at once would hold both of
        /// the pool's threads and stall every other test in the process.
        static func stop(_ processes: [Process]) async {
            processes.forEach { $0.terminate() }
            let deadline = ContinuousClock.now + .seconds(60)
            while processes.contains(where: \.isRunning), ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(50))
            }
            for process in processes where process.isRunning { kill(process.processIdentifier, SIGKILL) }
            while processes.contains(where: \.isRunning) { try? await Task.sleep(for: .milliseconds(20)) }
        }
    }

    /// The same confinement under a capacity search: the push service cannot take even the
    /// first step's load, so the search is generator-bound (exit 3) and names pushfleet's push
    /// service; no capacity is reported for the backend.
    @Test(
        "a capacity search whose limit is a starved push service ends generator-bound, naming it, exit 3, with no capacity",
        .enabled(if: Quota.available, "making a cgroup with a CPU quota is not allowed here")
    )
    func starvedPushServiceCapacity() async throws {
        let directory = try CLITests.temporaryDirectory()
        let quota = try #require(Quota(percentOfACore: 100))
        defer { quota.remove() }
        try await ConfinedServers.with(quota: quota, in: directory) { servers in
            let scenario = """
                name: confined-capacity
                target: { backend: \(servers.backendURL), pns: \(servers.pushURL) }
                fleet: { users: 20, platforms: { apns: 1 }, push_channel: per_device }
                lifecycle: [login, register, connect, receive]
                traffic:
                  - { name: plain, kind: plain, rate: 200/s, duration: 4s }
                deadline: 5s
                grace: 1s
                thresholds:
                  delivery.latency: ["p(99) < 2s"]
                capacity: { vary: rate, traffic: plain, start: 200/s, factor: 2, max: 800/s, resolution: 10%, warmup: 1s, window: 3s, repeats: 1 }
                """
            try Data(scenario.utf8).write(to: directory.appendingPathComponent("confined.yaml"))
            let run = try await CLITests.run(["capacity", "confined.yaml", "--out", "report", "--quiet"], in: directory)
            let result = try CapacityReport.decode(Data(contentsOf: directory.appendingPathComponent("report/capacity.json")))
            #expect(run.status == 3, "exit \(run.status): \(run.output.suffix(2_000))")
            #expect(result.outcome == "generator_bound", "\(result.outcome): \(result.summary)")
            #expect(result.capacity == nil)
            let limits = result.steps.filter { $0.verdict == "invalid" }.flatMap(\.generatorLimits)
            #expect(limits.contains { $0.hasPrefix("push service") }, "\(limits)")
            #expect(result.summary.contains("generator-bound") && result.summary.contains("push service"), "\(result.summary)")
        }
    }
}
