import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetClients
import PushFleetResults
import PushFleetScenario
import Synchronization
import Hummingbird
import PushFleetServerSupport
import ServiceLifecycle

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Benchmarks; each prints its figures in one table.",
        subcommands: [DeliveryBench.self, FleetBench.self, OmissionBench.self, HTTPBench.self, TLSBench.self]
    )

    /// Prints a titled two-column table of figures.
    static func printFigures(_ title: String, _ rows: [(String, String)]) {
        let width = rows.map(\.0.count).max() ?? 0
        FileHandleOutput.standardOutput(
            "\n\(title)\n" + rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
        )
    }
}

/// Sends through backend → push service → connected devices, with the servers in a child
/// process so that their memory per connected device can be read on its own.
struct DeliveryBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delivery",
        abstract: "Throughput of backend → push service → WebSocket devices, and push-service memory per connected device."
    )

    @Option(help: "Connected devices (one per user).") var devices = 5000
    @Option(help: "Push channel: per_device or multiplexed.") var channel = "per_device"
    @Option(help: "Offered secure-send rate (sends/s).") var rate = 2000
    @Option(help: "Sending time.") var duration = "15s"
    @Option(help: "Sends allowed in flight at once.") var inFlight = 256

    func validate() throws {
        guard (1...1_000_000).contains(devices) else { throw ValidationError("--devices must be 1 to 1000000") }
        guard ["per_device", "multiplexed"].contains(channel) else { throw ValidationError("--channel must be per_device or multiplexed") }
        guard rate > 0, inFlight > 0 else { throw ValidationError("--rate and --in-flight must be above 0") }
        _ = try DurationText.parse(duration)
    }

    func run() async throws {
        let server = try ServerProcess.start()
        defer { server.stop() }
        let baseline = server.residentBytes()
        let yaml = """
            name: bench-delivery
            seed: 1
            target: { backend: "\(server.backend)", pns: "\(server.pushService)" }
            fleet:
              users: \(devices)
              devices_per_user: 1
              platforms: { apns: 1 }
              arrival: { rate: 2000/s }
              push_channel: \(channel)
              connections: 128
            lifecycle: [login, register, connect, receive, fetch_secure]
            traffic:
              - { name: secure, kind: secure, rate: \(rate)/s, duration: \(duration), max_in_flight: \(inFlight) }
            deadline: 5s
            grace: 5s
            """
        let scenario = try ScenarioLoader.parse(yaml, file: "bench-delivery")
        let connected = Mutex<UInt64>(0)
        var logger = Logger(label: "pushfleet.bench")
        logger.logLevel = .warning
        var options = FleetRunner.Options(scenarioFile: "bench", scenarioText: yaml, version: PushFleet.version, logger: logger) {
            FileHandleOutput.standardError($0)
        }
        options.beforeTraffic = {
            try? await Task.sleep(for: .seconds(1))
            connected.withLock { $0 = server.residentBytes() }
        }
        let result = try await FleetRunner(scenario: scenario, options: options).run()
        let withDevices = connected.withLock { $0 }
        let traffic = max(0.001, result.info.trafficEndSecond - result.info.trafficStartSecond)
        let sends = result.counters["sends"] ?? 0
        let failed = result.counters["sends.failed"] ?? 0
        let delivery = result.operations.first { $0.name == "delivery" && $0.measure == "raw" }
        let perDevice = Double(withDevices) - Double(baseline)
        let rows: [(String, String)] = [
            ("devices ready", "\(result.devices.ready) of \(devices) (\(channel))"),
            ("offered rate", "\(rate)/s for \(duration), \(inFlight) in flight"),
            ("sends completed/s", String(format: "%.0f", (sends - failed) / traffic)),
            ("deliveries/s", String(format: "%.0f", Double(result.delivery.delivered + result.delivery.late) / traffic)),
            ("sends dropped (in-flight cap)", String(format: "%.0f", result.counters["sends.dropped"] ?? 0)),
            ("delivered / expected", "\(result.delivery.delivered + result.delivery.late) / \(result.delivery.expected)"),
            ("misdelivered, lost, leaks", "\(result.delivery.misdelivered), \(result.delivery.lost), \(result.delivery.leaks)"),
            ("delivery p50 / p99 (raw)", String(format: "%.2f ms / %.2f ms", delivery?.p50Ms ?? 0, delivery?.p99Ms ?? 0)),
            ("server RSS before devices", String(format: "%.1f MiB", Double(baseline) / 1_048_576)),
            ("server RSS with devices", String(format: "%.1f MiB", Double(withDevices) / 1_048_576)),
            ("server bytes per device", String(format: "%.1f KB", perDevice / Double(max(1, result.devices.ready)) / 1000)),
        ]
        Bench.printFigures("bench delivery (servers in a child process; backend and mock push service together)", rows)
        let c = result.delivery
        guard result.devices.ready == devices, c.expected > 0, c.misdelivered == 0, c.leaks == 0, c.duplicates == 0 else {
            throw BenchFailure("the delivery run itself was not right: \(result.devices.ready) of \(devices) ready, \(c.misdelivered) misdelivered, \(c.duplicates) duplicates, \(c.leaks) leaks")
        }
    }
}

/// `pushfleet serve` in a child process on free ports.
final class ServerProcess: Sendable {
    let process: Process
    let backend: String
    let pushService: String

    private init(process: Process, backend: String, pushService: String) {
        self.process = process
        self.backend = backend
        self.pushService = pushService
    }

    static func start() throws -> ServerProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        if !FileManager.default.isExecutableFile(atPath: process.executableURL!.path) {
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        }
        process.arguments = ["serve", "--backend-listen", "127.0.0.1:0", "--pns-listen", "127.0.0.1:0", "--log-level", "warning"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        var backend: String?
        var pushService: String?
        var buffer = ""
        let deadline = Date().addingTimeInterval(30)
        while backend == nil || pushService == nil {
            guard Date() < deadline else {
                process.terminate()
                throw ValidationError("the server process did not report its addresses")
            }
            let data = pipe.fileHandleForReading.availableData
            if data.isEmpty { break }
            buffer += String(decoding: data, as: UTF8.self)
            for line in buffer.split(separator: "\n") {
                // The address is the line's URL; words may follow it (`(store: memory)`).
                let url = line.split(separator: " ").first { $0.hasPrefix("http://") || $0.hasPrefix("https://") }.map(String.init)
                if line.hasPrefix("backend:") { backend = url }
                if line.hasPrefix("push service:") { pushService = url }
            }
        }
        guard let backend, let pushService else { throw ValidationError("the server process exited early") }
        return ServerProcess(process: process, backend: backend, pushService: pushService)
    }

    /// Resident memory of the server process, from /proc.
    func residentBytes() -> UInt64 {
        Self.residentBytes(pid: process.processIdentifier)
    }

    static func residentBytes(pid: Int32) -> UInt64 {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kb = UInt64(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kb * 1024
    }

    func stop() {
        process.interrupt()
        process.waitUntilExit()
    }
}

/// The fleet process's memory per device: a multiplexed fleet of N devices ramps in against
/// servers in a child process, then sends; the fleet's own RSS is read before the run and once
/// the whole fleet is in.
struct FleetBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Fleet-side memory per device and ramp time for a large fleet, then a send phase checked for 100% correct delivery."
    )

    @Option(help: "Devices (one per user).") var devices = 100_000
    @Option(help: "Device arrival rate per second.") var arrival = 1000
    @Option(help: "Push channel: multiplexed or per_device.") var channel = "multiplexed"
    @Option(help: "Secure-send rate during the send phase.") var rate = 200
    @Option(help: "Send phase length.") var duration = "20s"
    @Option(help: "Locust users for the reference figure (0: none).") var referenceUsers = 10_000
    @Flag(help: "Do not install missing reference tools.") var noInstall = false

    func validate() throws {
        guard (0...50_000).contains(referenceUsers) else { throw ValidationError("--reference-users must be 0 to 50000") }
        guard devices > 0, arrival > 0, rate > 0 else { throw ValidationError("--devices, --arrival and --rate must be above 0") }
        guard ["per_device", "multiplexed"].contains(channel) else { throw ValidationError("--channel must be per_device or multiplexed") }
        _ = try DurationText.parse(duration)
    }

    func run() async throws {
        let server = try ServerProcess.start()
        defer { server.stop() }
        let yaml = """
            name: bench-fleet
            seed: 1
            target: { backend: "\(server.backend)", pns: "\(server.pushService)" }
            fleet:
              users: \(devices)
              devices_per_user: 1
              platforms: { apns: 60, fcm: 30, wns: 10 }
              arrival: { rate: \(arrival)/s }
              push_channel: \(channel)
              connections: 64
            lifecycle: [login, register, connect, receive, fetch_secure]
            timeouts: { connect: 60s, register: 60s }
            traffic:
              - { name: secure, kind: secure, rate: \(rate)/s, duration: \(duration) }
            deadline: 5s
            grace: 5s
            """
        let scenario = try ScenarioLoader.parse(yaml, file: "bench-fleet")
        if let problem = FileLimit.problem(scenario, devices: devices) { throw ValidationError(problem) }
        let baseline = ServerProcess.residentBytes(pid: getpid())
        let atReady = Mutex<(UInt64, Double)>((0, 0))
        let start = Date()
        var logger = Logger(label: "pushfleet.bench")
        logger.logLevel = .warning
        var options = FleetRunner.Options(scenarioFile: "bench", scenarioText: yaml, version: PushFleet.version, logger: logger) {
            FileHandleOutput.standardError($0)
        }
        options.beforeTraffic = {
            atReady.withLock { $0 = (ServerProcess.residentBytes(pid: getpid()), Date().timeIntervalSince(start)) }
        }
        let result = try await FleetRunner(scenario: scenario, options: options).run()
        let (ready, rampSeconds) = atReady.withLock { $0 }
        let perDevice = (Double(ready) - Double(baseline)) / Double(max(1, result.devices.ready))
        let c = result.delivery
        let rows: [(String, String)] = [
            ("devices ready", "\(result.devices.ready) of \(devices) (\(channel))"),
            ("ramp (arrival \(arrival)/s)", String(format: "%.1f s", rampSeconds)),
            ("fleet RSS before", String(format: "%.1f MiB", Double(baseline) / 1_048_576)),
            ("fleet RSS with the fleet in", String(format: "%.1f MiB", Double(ready) / 1_048_576)),
            ("fleet bytes per device", String(format: "%.2f KB (target ≤ 10 KB: %@)", perDevice / 1000, perDevice <= 10_000 ? "met" : "NOT met")),
            ("fleet RSS at the end (ledger included)", String(format: "%.1f MiB", Double(ServerProcess.residentBytes(pid: getpid())) / 1_048_576)),
            ("server RSS", String(format: "%.1f MiB", Double(server.residentBytes()) / 1_048_576)),
            ("sends", String(format: "%.0f at %d/s", result.counters["sends"] ?? 0, rate)),
            ("expected / delivered / late / lost", "\(c.expected) / \(c.delivered) / \(c.late) / \(c.lost)"),
            ("misdelivered / duplicates / leaks", "\(c.misdelivered) / \(c.duplicates) / \(c.leaks)"),
            ("correct", c.expected > 0 && c.delivered == c.expected && c.misdelivered == 0 && c.duplicates == 0 ? "100%" : String(format: "%.3f%%", Double(c.delivered) / Double(max(1, c.expected)) * 100)),
        ]
        let correct = c.expected > 0 && c.delivered == c.expected && c.misdelivered == 0 && c.duplicates == 0 && c.leaks == 0
        var table = rows
        // The reference: Locust's memory per user, measured now on this machine.
        if referenceUsers > 0, let locust = LocustMemory.perUser(users: referenceUsers, install: !noInstall) {
            table.append(("Locust FastHttpUser bytes per user", String(format: "%.2f KB (%d → %d users, one keep-alive connection each)", locust / 1000, LocustMemory.baseUsers, referenceUsers)))
            table.append(("pushfleet / Locust per device", String(format: "%.2f× the memory (%.1f× less)", perDevice / locust, locust / max(perDevice, 1))))
        }
        Bench.printFigures("bench fleet (servers in a child process)", table)
        guard result.devices.ready == devices, correct else {
            throw BenchFailure("the fleet run itself was not right: \(result.devices.ready) of \(devices) ready, delivery not 100% correct")
        }
    }
}

/// Locust's resident memory per user: FastHttpUser users that each open a keep-alive connection
/// to a local nginx and then wait, at two fleet sizes; the slope between them.
enum LocustMemory {
    static let baseUsers = 1000

    static func perUser(users: Int, install: Bool) -> Double? {
        guard users > baseUsers, let locust = Tool.ensure("locust", from: .pypi("locust"), install: install),
            let nginx = try? Nginx.start(install: install)
        else { return nil }
        defer { nginx.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pf-locust-mem-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("locustfile.py").path
        let script = """
            from locust import constant, task
            from locust.contrib.fasthttp import FastHttpUser

            class Idle(FastHttpUser):
                wait_time = constant(3600)

                def on_start(self):
                    self.client.get("/")

                @task
                def idle(self):
                    pass
            """
        guard (try? script.write(toFile: file, atomically: true, encoding: .utf8)) != nil else { return nil }
        func resident(_ count: Int) -> Double? {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: locust)
            process.arguments = ["-f", file, "--headless", "-u", "\(count)", "-r", "1000", "-t", "600s", "--host", "http://127.0.0.1:\(nginx.port)", "--only-summary"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            guard (try? process.run()) != nil else { return nil }
            defer {
                // Only its memory is wanted, and it inherits this process's ignored SIGINT/SIGTERM.
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            Thread.sleep(forTimeInterval: Double(count) / 1000 + 8)
            let bytes = ServerProcess.residentBytes(pid: process.processIdentifier)
            return bytes > 0 ? Double(bytes) : nil
        }
        FileHandleOutput.standardError("measuring Locust's memory per user (\(baseUsers) and \(users) users) …")
        guard let small = resident(baseUsers), let large = resident(users), large > small else { return nil }
        return (large - small) / Double(users - baseUsers)
    }
}


/// Coordinated omission: an open-model sender against a target that stalls for `stall` every
/// `every`. While it stalls, sends keep coming due; measured from their intended start they wait
/// up to the whole stall, so the analytic distribution is: a share stall/every of the sends wait
/// uniformly between 0 and the stall, the rest only the service time. p(q) is then
/// stall × (1 − (1 − q) × every / stall) for the tail above the unaffected share.
struct OmissionBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "omission",
        abstract: "Corrected vs raw latency against a target that stalls periodically, compared with the analytic values."
    )

    @Option(help: "Send rate (sends/s).") var rate = 1000
    @Option(help: "Run length; a whole number of stall periods.") var duration = "60s"
    @Option(help: "Stall length.") var stall = "1s"
    @Option(help: "Stall period.") var every = "10s"

    func validate() throws {
        let period = try DurationText.parse(every)
        let length = try DurationText.parse(stall)
        guard length > .zero, length < period else { throw ValidationError("--stall must be shorter than --every") }
        guard rate > 0 else { throw ValidationError("--rate must be above 0") }
        _ = try DurationText.parse(duration)
    }

    func run() async throws {
        let period = try DurationText.parse(every)
        let length = try DurationText.parse(stall)
        var logger = Logger(label: "pushfleet.bench")
        logger.logLevel = .warning
        let target = StallingTarget(period: period, stall: length)
        let bound = Readiness<ListenAddress>()
        let group = ServiceGroup(configuration: .init(services: [.init(service: target.makeService(bound: bound, logger: logger))], logger: logger))
        let server = Task { try await group.run() }
        defer { server.cancel() }
        let url = try await bound.value().httpURL

        // A fleet with no device steps: only the sender runs, so the target is the whole path.
        let profile = LoadProfile.constant(Rate(perSecond: Double(rate)), for: try DurationText.parse(duration))
        var scenario = Scenario(
            name: "bench-omission", target: .external(backend: url, pushService: .url(url)), fleet: .init(users: 10), lifecycle: [],
            traffic: [.init(name: "open", kind: .plain, platforms: [.apns], profile: profile, maxInFlight: 1_000_000)],
            deadline: .seconds(5), grace: .zero
        )
        scenario.api = ScenarioLoader.preset("appbackend")
        var options = FleetRunner.Options(scenarioFile: "bench", scenarioText: "", version: PushFleet.version, logger: logger) {
            FileHandleOutput.standardError($0)
        }
        options.beforeTraffic = { target.align() }
        let result = try await FleetRunner(scenario: scenario, options: options).run()
        await group.triggerGracefulShutdown()

        let share = length.seconds / period.seconds
        func analytic(_ q: Double) -> Double {
            // Tail fraction above x is share × (1 − x / stall).
            let tail = 1 - q / 100
            return tail >= share - 1e-9 ? 0 : length.seconds * 1000 * (1 - tail / share)
        }
        let corrected = result.histograms["http.send"] ?? LatencyHistogram()
        let raw = result.histograms["http.send.raw"] ?? LatencyHistogram()
        var lines = ["", "bench omission: \(rate)/s for \(duration), target stalls \(stall) every \(every) (\(corrected.count) sends)",
            "percentile  analytic ms  corrected ms  error   raw ms  raw / analytic"]
        var worst = 0.0
        for q in [50.0, 95.0, 99.0, 99.9] {
            let expected = analytic(q)
            let c = Double(corrected.percentile(q)) / 1e6
            let r = Double(raw.percentile(q)) / 1e6
            let error = expected > 0 ? String(format: "%+.1f%%", (c - expected) / expected * 100) : "  —  "
            let rawShare = expected > 0 ? String(format: "%.3f", r / expected) : "—"
            if q >= 99 && expected > 0 { worst = max(worst, abs(c - expected) / expected) }
            lines.append(
                String(format: "p%-9@  %11.1f  %12.1f  %6@  %7.1f  %@", SVGChartNumber.text(q) as NSString, expected, c, error as NSString, r, rawShare as NSString)
            )
        }
        lines.append("corrected is measured from each send's intended start, raw from when the call was made.")
        lines.append(String(format: "target: corrected p99 and p99.9 within 10%% of analytic: %@ (worst %.1f%%)", worst <= 0.10 ? "met" : "NOT met", worst * 100))
        FileHandleOutput.standardOutput(lines.joined(separator: "\n"))
        guard corrected.count > 0 else { throw BenchFailure("no sends were measured") }
    }
}

enum SVGChartNumber {
    static func text(_ value: Double) -> String { value == value.rounded() ? String(Int(value)) : String(value) }
}

/// A target that answers every send at once, except during a stall of `stall` at the start of
/// each `period`, when it holds every request until the stall ends.
final class StallingTarget: Sendable {
    let period: Duration
    let stall: Duration
    private let origin = Mutex<Int64>(MonotonicClock.nanoseconds())

    init(period: Duration, stall: Duration) {
        self.period = period
        self.stall = stall
    }

    /// Starts the stall schedule now (when traffic starts), half a period in.
    func align() {
        origin.withLock { $0 = MonotonicClock.nanoseconds() - period.nanoseconds / 2 }
    }

    func makeService(bound: Readiness<ListenAddress>, logger: Logger) -> any Service {
        let router = Router()
        let period = self.period.nanoseconds
        let stall = self.stall.nanoseconds
        router.post("/api/notifications") { _, _ -> Response in
            let elapsed = MonotonicClock.nanoseconds() - self.origin.withLock { $0 }
            let phase = elapsed % period
            if phase < stall { try await Task.sleep(for: .nanoseconds(stall - phase)) }
            return Response(status: .ok)
        }
        return Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0), backlog: 4096),
            onServerRunning: { bound.succeed(ListenAddress(host: "127.0.0.1", port: $0.localAddress?.port ?? 0)) }, logger: logger
        )
    }
}

/// HTTP generation efficiency: requests per generator CPU-second against a trivial nginx
/// endpoint, pushfleet's request path beside wrk and Locust's FastHttpUser in one invocation.
struct HTTPBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http",
        abstract: "Requests per generator CPU-second against local nginx: pushfleet vs wrk vs Locust FastHttpUser.",
        discussion: "Runs Debian's nginx and wrk and PyPI's locust, installing any that is missing unless --no-install is given."
    )

    @Option(help: "Length of each tool's run.") var duration = "15s"
    @Option(help: "Concurrent connections (users for Locust).") var connections = 64
    @Flag(help: "Do not install missing reference tools.") var noInstall = false

    func validate() throws {
        guard (1...10_000).contains(connections) else { throw ValidationError("--connections must be 1 to 10000") }
        guard try DurationText.parse(duration) >= .seconds(1) else { throw ValidationError("--duration must be at least 1s") }
    }

    func run() async throws {
        let seconds = try DurationText.parse(duration).seconds
        let nginx = try Nginx.start(install: !noInstall)
        defer { nginx.stop() }
        let url = "http://127.0.0.1:\(nginx.port)/"
        var rows: [(tool: String, requests: Double, cpu: Double, wall: Double)] = []
        var count = Int.max

        if let wrk = Tool.ensure("wrk", from: .debian("wrk"), install: !noInstall) {
            let before = CPUTime.children()
            let started = Date()
            let output = try Tool.run(wrk, ["-t1", "-c\(connections)", "-d\(Int(seconds))s", url]).output
            let cpu = CPUTime.children() - before
            let requests = output.split(separator: "\n").first { $0.contains("requests in") }
                .flatMap { Double($0.trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") } ?? 0
            rows.append(("wrk -t1 (C)", requests, cpu, Date().timeIntervalSince(started)))
        }

        // pushfleet's request path: the BackendClient every device and sender uses, its loops on
        // the client's event loop, then on Swift's pool as a run's tasks are.
        for (onEventLoop, label) in [(true, "pushfleet (fleet HTTP client)"), (false, "pushfleet, tasks on Swift's pool")] {
            let before = CPUTime.own()
            let started = Date()
            let answered = await HTTPLoad.run(
                baseURL: "http://127.0.0.1:\(nginx.port)", path: "/", connections: connections, duration: .nanoseconds(Int64(seconds * 1e9)),
                onEventLoop: onEventLoop
            )
            rows.append((label, Double(answered), CPUTime.own() - before, Date().timeIntervalSince(started)))
            count = min(count, answered)
        }

        if let locust = Tool.ensure("locust", from: .pypi("locust"), install: !noInstall) {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pf-locust-\(getpid())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let file = directory.appendingPathComponent("locustfile.py").path
            try """
                from locust import constant, task
                from locust.contrib.fasthttp import FastHttpUser

                class Fast(FastHttpUser):
                    wait_time = constant(0)

                    @task
                    def get(self):
                        self.client.get("/")
                """.write(toFile: file, atomically: true, encoding: .utf8)
            let before = CPUTime.children()
            let started = Date()
            _ = try? Tool.run(locust, [
                "-f", file, "--headless", "-u", "\(connections)", "-r", "\(connections)", "-t", "\(Int(seconds))s", "--host", "http://127.0.0.1:\(nginx.port)",
                "--csv", directory.appendingPathComponent("out").path, "--only-summary",
            ])
            let cpu = CPUTime.children() - before
            let stats = (try? String(contentsOfFile: directory.appendingPathComponent("out_stats.csv").path, encoding: .utf8)) ?? ""
            let aggregated = stats.split(whereSeparator: \.isNewline).first { $0.contains("Aggregated") }?.split(separator: ",", omittingEmptySubsequences: false)
            rows.append(("Locust FastHttpUser (Python)", aggregated.flatMap { Double($0[2]) } ?? 0, cpu, Date().timeIntervalSince(started)))
        }

        func perCPU(_ prefix: String) -> Double? {
            rows.first { $0.tool.hasPrefix(prefix) }.map { $0.requests / max($0.cpu, 0.001) }
        }
        let wrkRate = perCPU("wrk")
        let locustRate = perCPU("Locust")
        var lines = ["", "bench http: GET \(url) (nginx, 1 worker), \(connections) connections, \(duration) each",
            "tool                              requests     req/s   CPU s   req/CPU-s   × wrk   × Locust"]
        for row in rows {
            let rate = row.requests / max(row.cpu, 0.001)
            let toWrk = wrkRate.map { String(format: "%5.2f", rate / $0) } ?? "    —"
            let toLocust = locustRate.map { String(format: "%8.2f", rate / $0) } ?? "       —"
            lines.append(
                row.tool.padding(toLength: 32, withPad: " ", startingAt: 0)
                    + String(format: "  %9.0f  %8.0f  %6.1f  %10.0f  ", row.requests, row.requests / row.wall, row.cpu, rate) + toWrk + "  " + toLocust
            )
        }
        for (label, own) in [("on its event loop", perCPU("pushfleet (") ?? 0), ("on Swift's pool", perCPU("pushfleet,") ?? 0)] {
            lines.append("targets, pushfleet \(label): ≥ 0.25 × wrk: " + (wrkRate.map { own / $0 >= 0.25 ? "met" : "NOT met" } ?? "not measured (no wrk)")
                + "; ≥ 5 × Locust FastHttpUser: " + (locustRate.map { own / $0 >= 5 ? "met" : "NOT met" } ?? "not measured (no locust)"))
        }
        FileHandleOutput.standardOutput(lines.joined(separator: "\n"))
        guard count > 0 else { throw BenchFailure("pushfleet got no answers from nginx") }
    }
}

/// A benchmark whose own run went wrong (as opposed to a target not met): exit 1.
struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A throwaway nginx answering 200 "ok" on 127.0.0.1 with one worker.
final class Nginx: Sendable {
    let process: Process
    let port: Int

    private init(process: Process, port: Int) {
        self.process = process
        self.port = port
    }

    static func start(install: Bool) throws -> Nginx {
        guard let binary = Tool.ensure("nginx", from: .debian("nginx"), install: install) else {
            throw ValidationError("nginx is needed as the benchmark's target and is missing (apt-get install nginx)")
        }
        let prefix = FileManager.default.temporaryDirectory.appendingPathComponent("pf-nginx-\(getpid())").path
        try FileManager.default.createDirectory(atPath: prefix + "/logs", withIntermediateDirectories: true)
        let port = Int.random(in: 20_000...30_000)
        let conf = """
            worker_processes 1; daemon off; pid \(prefix)/nginx.pid; error_log \(prefix)/logs/error.log;
            worker_rlimit_nofile 20000; events { worker_connections 16384; }
            http { access_log off; keepalive_requests 1000000;
              server { listen 127.0.0.1:\(port); location / { return 200 "ok"; } } }
            """
        try conf.write(toFile: prefix + "/nginx.conf", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-p", prefix, "-c", prefix + "/nginx.conf"]
        try process.run()
        Thread.sleep(forTimeInterval: 0.5)
        guard process.isRunning else { throw ValidationError("nginx did not start; see \(prefix)/logs/error.log") }
        return Nginx(process: process, port: port)
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// The reference tools the benchmarks run beside pushfleet: found on PATH, or installed from
/// their registry (Debian's packages, PyPI) when missing.
enum Tool {
    enum Source {
        case debian(String)
        case pypi(String)

        var hint: String {
            switch self {
            case .debian(let package): "apt-get install \(package)"
            case .pypi(let package): "pip install \(package)"
            }
        }
    }

    static func find(_ name: String) -> String? {
        var paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        paths += ["/usr/sbin", "/usr/local/bin", "/sbin"]
        // pip puts console scripts next to the interpreter, which a pyenv shim may not cover yet.
        if let python = paths.map({ "\($0)/python3" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }),
            let scripts = try? run(python, ["-c", "import sysconfig; print(sysconfig.get_path('scripts'))"]), scripts.status == 0
        {
            paths.append(scripts.output.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return paths.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The tool's path, installing it first when it is missing and `install` allows; nil, with
    /// the reason on standard error, when it cannot be had.
    static func ensure(_ name: String, from source: Source, install: Bool) -> String? {
        if let path = find(name) { return path }
        guard install else {
            FileHandleOutput.standardError("\(name) is missing (\(source.hint)); not installing it (--no-install)")
            return nil
        }
        FileHandleOutput.standardError("\(name) is missing: \(source.hint) …")
        var attempts: [[String]] = []
        switch source {
        case .debian(let package):
            let sudo = getuid() == 0 ? [] : find("sudo").map { [$0, "-n"] } ?? []
            if let aptGet = find("apt-get") {
                let install = sudo + [aptGet, "install", "-y", "-qq", package]
                attempts = [install, sudo + [aptGet, "update", "-qq"], install]
            }
        case .pypi(let package):
            if let python = find("python3") { attempts = [[python, "-m", "pip", "install", "--quiet", package]] }
        }
        var last = "no installer found"
        for command in attempts {
            guard let result = try? run(command[0], Array(command.dropFirst())) else { continue }
            last = result.output.split(separator: "\n").suffix(3).joined(separator: " | ")
            if result.status == 0, let path = find(name) {
                FileHandleOutput.standardError("installed \(name): \(path)")
                return path
            }
        }
        FileHandleOutput.standardError("\(name) is missing and could not be installed (\(source.hint)): \(last)")
        return nil
    }

    @discardableResult
    static func run(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

/// CPU seconds (user + system) from getrusage.
enum CPUTime {
    static func own() -> Double { usage(RUSAGE_SELF) }
    /// Of children that have exited and been waited for.
    static func children() -> Double { usage(RUSAGE_CHILDREN) }

    private static func usage(_ who: __rusage_who) -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(who.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
