import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetRunner
import PushFleetScenario
import Synchronization

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Benchmarks; each prints its figures in one table.",
        subcommands: [DeliveryBench.self, FleetBench.self]
    )
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
        let width = rows.map(\.0.count).max() ?? 0
        FileHandleOutput.standardOutput(
            "\nbench delivery (servers in a child process; backend and mock push service together)\n"
                + rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
        )
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
                if line.hasPrefix("backend:") { backend = line.split(separator: " ").last.map(String.init) }
                if line.hasPrefix("push service:") { pushService = line.split(separator: " ").last.map(String.init) }
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

    func validate() throws {
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
            ("fleet bytes per device", String(format: "%.2f KB (target ≤ 10 KB)", perDevice / 1000)),
            ("fleet RSS at the end (ledger included)", String(format: "%.1f MiB", Double(ServerProcess.residentBytes(pid: getpid())) / 1_048_576)),
            ("server RSS", String(format: "%.1f MiB", Double(server.residentBytes()) / 1_048_576)),
            ("sends", String(format: "%.0f at %d/s", result.counters["sends"] ?? 0, rate)),
            ("expected / delivered / late / lost", "\(c.expected) / \(c.delivered) / \(c.late) / \(c.lost)"),
            ("misdelivered / duplicates / leaks", "\(c.misdelivered) / \(c.duplicates) / \(c.leaks)"),
            ("correct", c.expected > 0 && c.delivered == c.expected && c.misdelivered == 0 && c.duplicates == 0 ? "100%" : String(format: "%.3f%%", Double(c.delivered) / Double(max(1, c.expected)) * 100)),
        ]
        let width = rows.map(\.0.count).max() ?? 0
        FileHandleOutput.standardOutput(
            "\nbench fleet (servers in a child process)\n"
                + rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
        )
    }
}
