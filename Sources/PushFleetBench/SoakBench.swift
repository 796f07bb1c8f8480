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

/// A long run's memory per settled send: secure sends at a constant rate to multiplexed devices
/// (servers in a child process), the fleet process's resident memory and heap in use sampled
/// every 250 ms; after a warm-up, the slope of each against sends made is what one send leaves
/// behind. A generator whose memory grows with the run cannot run for hours.
public struct SoakBench: AsyncParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Bytes the fleet process keeps per settled send in a long run (resident memory and heap in use)."
    )

    @Option(help: "Devices (one per user), on the multiplexed channel.") var devices = 2000
    @Option(help: "Secure sends per second.") var rate = 1000
    @Option(help: "Sending time.") var duration = "60s"
    @Option(help: "Share of the sending time left out of the slope as warm-up (0–0.9).") var warmup = 0.25
    @Option(help: "The scenario's horizon: sends settled for good are judged and let go of once it has passed (over 5s).")
    var horizon = "20s"

    public init() {}

    public func validate() throws {
        guard (1...1_000_000).contains(devices) else { throw ValidationError("--devices must be 1 to 1000000") }
        guard (1...100_000).contains(rate) else { throw ValidationError("--rate must be 1 to 100000") }
        guard (0...0.9).contains(warmup) else { throw ValidationError("--warmup must be 0 to 0.9") }
        let seconds = try Bench.duration(duration, flag: "--duration").seconds
        guard seconds >= 10, seconds <= 86_400 else { throw ValidationError("--duration must be 10s to 24h") }
        let horizon = try Bench.duration(horizon, flag: "--horizon")
        guard horizon > .seconds(5), horizon <= .seconds(86_400) else { throw ValidationError("--horizon must be over 5s (the deadline) and at most 24h") }
    }

    struct Sample: Sendable {
        var time: Double
        var resident: Double
        var heap: Double
        var obtained: Double
    }

    public func run() async throws {
        // Stored content need only outlive its fetch: at a day (serve's default) a long soak
        // would fill the backend's notification limit and measure refusals.
        try await ServerProcess.run(arguments: ["--notification-ttl", "2m"]) { server in try await measure(against: server) }
    }

    private func measure(against server: ServerProcess) async throws {
        let seconds = try Bench.duration(duration, flag: "--duration").seconds
        let yaml = """
            name: bench-soak
            seed: 1
            target: { backend: "\(server.backend)", pns: "\(server.pushService)" }
            fleet:
              users: \(devices)
              devices_per_user: 1
              platforms: { apns: 1 }
              arrival: { rate: 2000/s }
              push_channel: multiplexed
              connections: 64
            lifecycle: [login, register, connect, receive, fetch_secure]
            traffic:
              - { name: secure, kind: secure, rate: \(rate)/s, duration: \(duration), max_in_flight: 512 }
            deadline: 5s
            horizon: \(horizon)
            grace: 2s
            """
        let scenario = try ScenarioLoader.parse(yaml, file: "bench-soak")
        let samples = Mutex<[Sample]>([])
        let trafficStart = Mutex<Double?>(nil)
        let done = Atomic<Bool>(false)
        var options = FleetRunner.Options.bench(yaml)
        let sampler = Task {
            while !done.load(ordering: .relaxed) {
                let heap = HeapUsage.report()
                let sample = Sample(
                    time: Self.now(), resident: Double(ProcessMemory.resident() ?? 0), heap: Double(heap?.inUse ?? 0), obtained: Double(heap?.obtained ?? 0)
                )
                samples.withLock { $0.append(sample) }
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        options.beforeTraffic = { trafficStart.withLock { $0 = Self.now() } }
        let result = try await FleetRunner(scenario: scenario, options: options).run()
        done.store(true, ordering: .relaxed)
        _ = await sampler.value
        guard let start = trafficStart.withLock({ $0 }) else { throw BenchFailure("the run never reached its traffic") }
        let all = samples.withLock { $0 }
        // The window skips the warm-up and ends with the sending; sends made per second are the
        // rate less what was dropped at max_in_flight.
        let window = all.filter { $0.time >= start + seconds * warmup && $0.time <= start + seconds }
        let made = result.counters["sends"] ?? 0
        let sendsIn = max(1, made / seconds)
        let residentSlope = Self.slope(window.map { ($0.time, $0.resident) }) / sendsIn
        let heapSlope = Self.slope(window.map { ($0.time, $0.heap) }) / sendsIn
        let first = window.first
        let last = window.last
        let c = result.delivery
        let rows: [(String, String)] = [
            ("devices ready", "\(result.devices.ready) of \(devices) (multiplexed)"),
            ("secure sends", "\(rate)/s for \(duration); \(Int(made)) made, \(Int(result.counters["sends.dropped"] ?? 0)) dropped, \(Int(result.counters["sends.failed"] ?? 0)) failed"),
            ("delivered / expected", "\(c.delivered + c.late) / \(c.expected); lost \(c.lost), misdelivered \(c.misdelivered)"),
            ("samples in the slope", "\(window.count), from \(String(format: "%.0f", seconds * warmup)) s to \(String(format: "%.0f", seconds)) s of sending"),
            ("resident", String(format: "%.1f → %.1f MiB", (first?.resident ?? 0) / 1_048_576, (last?.resident ?? 0) / 1_048_576)),
            ("heap in use", String(format: "%.1f → %.1f MiB", (first?.heap ?? 0) / 1_048_576, (last?.heap ?? 0) / 1_048_576)),
            ("heap from the system", String(format: "%.1f → %.1f MiB (the rest is free memory glibc keeps)", (first?.obtained ?? 0) / 1_048_576, (last?.obtained ?? 0) / 1_048_576)),
            ("peak resident (VmHWM)", String(format: "%.1f MiB", Double(ProcessMemory.peakResident() ?? 0) / 1_048_576)),
            ("resident growth after the warm-up", String(format: "%+.1f%%", ((last?.resident ?? 0) / max(1, first?.resident ?? 0) - 1) * 100)),
            ("resident bytes per send", String(format: "%.0f B", residentSlope)),
            ("… in the window's last half", String(format: "%.0f B", Self.slope(window.suffix(window.count / 2).map { ($0.time, $0.resident) }) / sendsIn)),
            ("heap bytes per send", String(format: "%.0f B", heapSlope)),
        ]
        Bench.printFigures("bench soak (fleet in this process, servers in a child process)", rows)
        let failed = Int(result.counters["sends.failed"] ?? 0)
        guard result.devices.ready == devices, c.expected > 0, c.misdelivered == 0, c.duplicates == 0, c.lost == 0, failed == 0 else {
            throw BenchFailure(run: "soak", "\(result.devices.ready) of \(devices) ready, \(c.lost) lost, \(c.misdelivered) misdelivered, \(c.duplicates) duplicates, \(failed) sends failed", result)
        }
        guard window.count >= 8 else { throw BenchFailure("too few samples (\(window.count)) for a slope") }
    }

    static func now() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1e9
    }

    /// Least-squares slope of y over x.
    static func slope(_ points: [(Double, Double)]) -> Double {
        guard points.count > 1 else { return 0 }
        let n = Double(points.count)
        let meanX = points.reduce(0) { $0 + $1.0 } / n
        let meanY = points.reduce(0) { $0 + $1.1 } / n
        var numerator = 0.0
        var denominator = 0.0
        for (x, y) in points {
            numerator += (x - meanX) * (y - meanY)
            denominator += (x - meanX) * (x - meanX)
        }
        return denominator > 0 ? numerator / denominator : 0
    }
}
