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

/// Sends through backend → push service → connected devices, with the servers in a child
/// process so that their memory per connected device can be read on its own.
public struct DeliveryBench: AsyncParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "delivery",
        abstract: "Throughput of backend → push service → WebSocket devices, and push-service memory per connected device."
    )

    @Option(help: "Connected devices (one per user).") var devices = 5000
    @Option(help: "Push channel: per_device or multiplexed.") var channel = "per_device"
    @Option(help: "Offered secure-send rate (sends/s).") var rate = 2000
    @Option(help: "Sending time.") var duration = "15s"
    @Option(help: "Sends allowed in flight at once.") var inFlight = 256
    @Option(help: "Trace context on every request (on) or on none (off): what tracing costs the fleet and the servers.") var tracing = "on"
    @Option(help: "The servers in one process (together) or the push service and the backend in two (split): each one's CPU per push on its own.")
    var servers = "together"

    public init() {}

    public func validate() throws {
        guard (1...1_000_000).contains(devices) else { throw ValidationError("--devices must be 1 to 1000000") }
        guard ["per_device", "multiplexed"].contains(channel) else { throw ValidationError("--channel must be per_device or multiplexed") }
        guard rate > 0, inFlight > 0 else { throw ValidationError("--rate and --in-flight must be above 0") }
        guard ["on", "off"].contains(tracing) else { throw ValidationError("--tracing must be on or off") }
        guard ["together", "split"].contains(servers) else { throw ValidationError("--servers must be together or split") }
        _ = try Bench.duration(duration, flag: "--duration")
    }

    public func run() async throws {
        try await ServerProcess.run { server in
            guard servers == "split" else { return try await measure(against: server) }
            // A second `serve` whose backend sends to the first one's push service: the first
            // process's CPU is then the push service's and the gateway's, the second's the backend's.
            try await ServerProcess.run(arguments: ["--pns-url", server.pushService]) { backend in
                try await measure(against: server, backend: backend)
            }
        }
    }

    /// `backend`: the backend's own process when the servers are split; the push service (and
    /// the device gateway) is `server`'s either way.
    private func measure(against server: ServerProcess, backend: ServerProcess? = nil) async throws {
        let baseline = server.residentBytes()
        let yaml = """
            name: bench-delivery
            seed: 1
            target: { backend: "\((backend ?? server).backend)", pns: "\(server.pushService)" }
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
            tracing: { propagate: \(tracing == "on") }
            """
        let scenario = try ScenarioLoader.parse(yaml, file: "bench-delivery")
        let connected = Mutex<UInt64>(0)
        // What the fleet process and the servers' process had spent when traffic began.
        let atTraffic = Mutex<(fleetCPU: Double, serverCPU: Double, backendCPU: Double, fleetRSS: UInt64)>((0, 0, 0, 0))
        // And when the drain ended, before the fleet disconnected.
        let atDrainEnd = Mutex<(fleetCPU: Double, serverCPU: Double, backendCPU: Double)?>(nil)
        // Each process's context switches at the same two moments.
        let readSwitches: @Sendable () -> Switches = { (ContextSwitches.of() ?? .init(), server.contextSwitches(), backend?.contextSwitches() ?? .init()) }
        let switchesAtTraffic = Mutex<Switches?>(nil)
        let switchesAtDrainEnd = Mutex<Switches?>(nil)
        var options = FleetRunner.Options.bench(yaml)
        options.beforeTraffic = {
            try? await Task.sleep(for: .seconds(1))
            connected.withLock { $0 = server.residentBytes() }
            atTraffic.withLock { $0 = (CPUTime.own(), server.cpuSeconds(), backend?.cpuSeconds() ?? 0, ServerProcess.residentBytes(pid: getpid())) }
            let now = readSwitches()
            switchesAtTraffic.withLock { $0 = now }
        }
        options.afterDrain = {
            atDrainEnd.withLock { $0 = (CPUTime.own(), server.cpuSeconds(), backend?.cpuSeconds() ?? 0) }
            let now = readSwitches()
            switchesAtDrainEnd.withLock { $0 = now }
        }
        let result = try await FleetRunner(scenario: scenario, options: options).run()
        let atEnd = (fleetCPU: CPUTime.own(), serverCPU: server.cpuSeconds(), backendCPU: backend?.cpuSeconds() ?? 0)
        let (fleetCPU, serverCPU, backendCPU, fleetRSS) = atTraffic.withLock { $0 }
        // Per push: from traffic start to the drain's end. What comes after (every device
        // disconnecting, the fleet's verdict) is a run's fixed cost, printed on its own.
        let drained = atDrainEnd.withLock { $0 } ?? atEnd
        let fleetCPUAfter = drained.fleetCPU - fleetCPU
        let pushServiceCPUAfter = drained.serverCPU - serverCPU
        let backendCPUAfter = backend == nil ? 0 : drained.backendCPU - backendCPU
        let serverCPUAfter = pushServiceCPUAfter + backendCPUAfter
        let fleetCPUEnding = atEnd.fleetCPU - drained.fleetCPU
        let serverCPUEnding = (atEnd.serverCPU - drained.serverCPU) + (atEnd.backendCPU - drained.backendCPU)
        let fleetRSSAfter = ServerProcess.residentBytes(pid: getpid())
        let withDevices = connected.withLock { $0 }
        let traffic = max(0.001, result.info.trafficEndSecond - result.info.trafficStartSecond)
        let sends = result.counters["sends"] ?? 0
        let failed = result.counters["sends.failed"] ?? 0
        let delivery = result.operations.first { $0.name == "delivery" && $0.measure == "raw" }
        let perDevice = Double(withDevices) - Double(baseline)
        let pushes = Double(max(1, result.delivery.delivered + result.delivery.late))
        let rows: [(String, String)] = [
            ("devices ready", "\(result.devices.ready) of \(devices) (\(channel))"),
            ("offered rate", "\(rate)/s for \(duration), \(inFlight) in flight, tracing \(tracing)"),
            ("sends completed/s", String(format: "%.0f", (sends - failed) / traffic)),
            ("deliveries/s", String(format: "%.0f", Double(result.delivery.delivered + result.delivery.late) / traffic)),
            ("sends dropped (in-flight cap)", String(format: "%.0f", result.counters["sends.dropped"] ?? 0)),
            ("delivered / expected", "\(result.delivery.delivered + result.delivery.late) / \(result.delivery.expected)"),
            ("misdelivered, lost, leaks", "\(result.delivery.misdelivered), \(result.delivery.lost), \(result.delivery.leaks)"),
            ("delivery p50 / p99 (raw)", String(format: "%.2f ms / %.2f ms", delivery?.p50Ms ?? 0, delivery?.p99Ms ?? 0)),
            ("server RSS before devices", String(format: "%.1f MiB", Double(baseline) / 1_048_576)),
            ("server RSS with devices", String(format: "%.1f MiB", Double(withDevices) / 1_048_576)),
            ("server bytes per device", String(format: "%.1f KB", perDevice / Double(max(1, result.devices.ready)) / 1000)),
            // From traffic start to the drain's end, per push received.
            ("fleet CPU per push", String(format: "%.1f µs", fleetCPUAfter / pushes * 1e6)),
            ("servers' CPU per push", String(format: "%.1f µs", serverCPUAfter / pushes * 1e6)),
            ("context switches per push", Self.perPush(from: switchesAtTraffic.withLock { $0 }, to: switchesAtDrainEnd.withLock { $0 } ?? readSwitches(), pushes: pushes, split: backend != nil)),
            ("CPU after the drain", String(format: "fleet %.0f ms, servers %.0f ms", fleetCPUEnding * 1e3, serverCPUEnding * 1e3) + " (\(result.devices.ready) devices disconnecting; the fleet's verdict)"),
        ]
        let split: [(String, String)] =
            backend == nil
            ? []
            : [
                ("push service's CPU per push", String(format: "%.1f µs (its own process, the device gateway included)", pushServiceCPUAfter / pushes * 1e6)),
                ("backend's CPU per push", String(format: "%.1f µs (its own process)", backendCPUAfter / pushes * 1e6)),
            ]
        let rest: [(String, String)] = [
            ("fleet RSS growth per push", String(format: "%.0f B (%.1f → %.1f MiB)", (Double(fleetRSSAfter) - Double(fleetRSS)) / pushes, Double(fleetRSS) / 1_048_576, Double(fleetRSSAfter) / 1_048_576)),
            ("push service watched", result.hops?.view ?? "no"),
        ]
        let title =
            backend == nil
            ? "bench delivery (servers in a child process; backend and mock push service together)"
            : "bench delivery (servers in two child processes: the mock push service, and the backend sending to it)"
        Bench.printFigures(title, rows + split + rest)
        let perPush = fleetCPUAfter / pushes * 1e6
        let crypto = try WebPushCryptoCost.measure()
        Bench.printFigures(
            "webpush: cryptography per push (this process's CPU, median of 3 × 2,000; ratio to the fleet CPU per push above)",
            crypto.map { ($0.name, String(format: "%.1f µs (%.2f×)", $0.microseconds, $0.microseconds / max(0.001, perPush))) }
        )
        let c = result.delivery
        guard result.devices.ready == devices, c.expected > 0, c.misdelivered == 0, c.leaks == 0, c.duplicates == 0 else {
            throw BenchFailure(run: "delivery", "\(result.devices.ready) of \(devices) ready, \(c.misdelivered) misdelivered, \(c.duplicates) duplicates, \(c.leaks) leaks", result)
        }
    }

    /// The fleet's, the push service's (or the servers' together) and the backend's (split) switches.
    typealias Switches = (fleet: ContextSwitches, server: ContextSwitches, backend: ContextSwitches)

    /// "fleet 2.90 woken + 0.35 preempted, servers …": the wake-ups that pace a push's CPU.
    static func perPush(from start: Switches?, to end: Switches, pushes: Double, split: Bool) -> String {
        guard let start else { return "–" }
        func text(_ name: String, _ switches: ContextSwitches) -> String {
            "\(name) " + String(format: "%.2f woken + %.2f preempted", Double(switches.woken) / pushes, Double(switches.preempted) / pushes)
        }
        let pushService = end.server.since(start.server)
        let backend = end.backend.since(start.backend)
        let servers = ContextSwitches(woken: pushService.woken + backend.woken, preempted: pushService.preempted + backend.preempted)
        let parts = [text("fleet", end.fleet.since(start.fleet)), text("servers", servers)] + (split ? [text("push service", pushService), text("backend", backend)] : [])
        return parts.joined(separator: ", ")
    }
}
