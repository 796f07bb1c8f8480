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
        subcommands: [DeliveryBench.self]
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
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
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
