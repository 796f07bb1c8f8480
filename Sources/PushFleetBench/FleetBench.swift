public import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetLedger
import PushFleetResults
import PushFleetScenario
import Synchronization

/// The fleet process's memory per device: a multiplexed fleet of N devices ramps in against
/// servers in a child process, then sends; the fleet's own RSS is read before the run and once
/// the whole fleet is in.
public struct FleetBench: AsyncParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Fleet-side memory per device and ramp time for a large fleet, then a send phase checked for 100% correct delivery."
    )

    @Option(help: "Devices (one per user).") var devices = 100_000
    @Option(help: "Device arrival rate per second.") var arrival = 1000
    @Option(help: "Push channel: multiplexed or per_device.") var channel = "multiplexed"
    @Option(help: "Secure-send rate during the send phase.") var rate = 200
    @Option(help: "Send phase length.") var duration = "20s"
    @Option(help: "Locust users for the reference figure (0: none).") var referenceUsers = 10_000

    public init() {}

    public func validate() throws {
        guard (0...50_000).contains(referenceUsers) else { throw ValidationError("--reference-users must be 0 to 50000") }
        guard devices > 0, arrival > 0, rate > 0 else { throw ValidationError("--devices, --arrival and --rate must be above 0") }
        guard ["per_device", "multiplexed"].contains(channel) else { throw ValidationError("--channel must be per_device or multiplexed") }
        _ = try Bench.duration(duration, flag: "--duration")
    }

    public func run() async throws {
        try await ServerProcess.run { server in try await measure(against: server) }
    }

    private func measure(against server: ServerProcess) async throws {
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
        let heapBefore = HeapUsage.inUse() ?? 0
        let atReady = Mutex<(resident: UInt64, peak: UInt64, seconds: Double, heap: UInt64)>((0, 0, 0, 0))
        let start = Date()
        var options = FleetRunner.Options.bench(yaml)
        options.beforeTraffic = {
            // VmHWM now is the ramp's peak: the highest the process has been so far.
            let resident = ServerProcess.residentBytes(pid: getpid())
            let heap = HeapUsage.inUse() ?? 0
            atReady.withLock { $0 = (resident, ProcessMemory.peakResident() ?? resident, Date().timeIntervalSince(start), heap) }
        }
        let result = try await FleetRunner(scenario: scenario, options: options).run()
        let (ready, rampPeak, rampSeconds, heapReady) = atReady.withLock { $0 }
        let readyDevices = Double(max(1, result.devices.ready))
        let perDevice = (Double(ready) - Double(baseline)) / readyDevices
        let peakPerDevice = (Double(rampPeak) - Double(baseline)) / readyDevices
        let end = ServerProcess.residentBytes(pid: getpid())
        let endPerDevice = (Double(end) - Double(baseline)) / readyDevices
        let serverResident = server.residentBytes()
        let c = result.delivery
        let setup = result.histograms[MetricName.setup]
        let rows: [(String, String)] = [
            ("devices ready", "\(result.devices.ready) of \(devices) (\(channel))"),
            ("ramp (arrival \(arrival)/s)", String(format: "%.1f s", rampSeconds)),
            ("setup p50 / p99 / max (from intended arrival)", setup.map { String(format: "%.1f / %.1f / %.1f ms", Double($0.percentile(50)) / 1e6, Double($0.percentile(99)) / 1e6, Double($0.max) / 1e6) } ?? "-"),
            ("fleet RSS before", String(format: "%.1f MiB", Double(baseline) / 1_048_576)),
            ("fleet RSS with the fleet in", String(format: "%.1f MiB", Double(ready) / 1_048_576)),
            ("fleet bytes per device", String(format: "%.2f KB", perDevice / 1000)),
            ("fleet heap in use per device (malloc_info)", String(format: "%.2f KB", (Double(heapReady) - Double(heapBefore)) / readyDevices / 1000)),
            ("fleet peak RSS during the ramp (VmHWM)", String(format: "%.1f MiB = %.2f KB per device", Double(rampPeak) / 1_048_576, peakPerDevice / 1000)),
            ("fleet RSS at the end (ledger included)", String(format: "%.1f MiB = %.2f KB per device", Double(end) / 1_048_576, endPerDevice / 1000)),
            ("server RSS", String(format: "%.1f MiB = %.2f KB per device", Double(serverResident) / 1_048_576, Double(serverResident) / readyDevices / 1000)),
            ("sends", String(format: "%.0f at %d/s", result.counters["sends"] ?? 0, rate)),
            ("expected / delivered / late / lost", "\(c.expected) / \(c.delivered) / \(c.late) / \(c.lost)"),
            ("misdelivered / duplicates / leaks", "\(c.misdelivered) / \(c.duplicates) / \(c.leaks)"),
            ("correct", c.expected > 0 && c.delivered == c.expected && c.misdelivered == 0 && c.duplicates == 0 ? "100%" : String(format: "%.3f%%", Double(c.delivered) / Double(max(1, c.expected)) * 100)),
        ]
        let correct = c.expected > 0 && c.delivered == c.expected && c.misdelivered == 0 && c.duplicates == 0 && c.leaks == 0
        var table = rows
        // The reference: Locust's memory per user, measured now on this machine.
        if referenceUsers > 0, let locust = await LocustMemory.perUser(users: referenceUsers) {
            table.append(("Locust FastHttpUser bytes per user", String(format: "%.2f KB (%d → %d users, one keep-alive connection each)", locust / 1000, LocustMemory.baseUsers, referenceUsers)))
            table.append(("pushfleet / Locust per device", String(format: "%.2f× the memory (%.1f× less)", perDevice / locust, locust / max(perDevice, 1))))
        }
        Bench.printFigures("bench fleet (servers in a child process)", table)
        guard result.devices.ready == devices, correct else {
            throw BenchFailure(run: "fleet", "\(result.devices.ready) of \(devices) ready, delivery not 100% correct", result)
        }
    }
}
