public import ArgumentParser
import Foundation
import PushFleetCore
import PushFleetLauncher
import PushFleetResults
import Subprocess
import Synchronization
import SystemPackage

/// A fleet larger than one process holds comfortably, as K local shards on the multiplexed
/// channel against one `pushfleet serve`, merged (and with --compare, beside the same fleet in
/// one process): each shard's memory, the merge's time and memory, the servers' memory.
public struct ShardsBench: AsyncParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "shards",
        abstract: "A large fleet as K local shards against one serve, merged; each shard's memory and the merge's time and memory."
    )

    @Option(help: "Devices (one per user).") var devices = 200_000
    @Option(help: "Shard processes.") var shards = 4
    @Option(help: "Device arrival rate per second, the whole fleet's.") var arrival = 2000
    @Option(help: "Secure-send rate during the send phase, the whole fleet's.") var rate = 400
    @Option(help: "Send phase length.") var duration = "20s"
    @Option(help: "Where the run's folder goes (default: a temporary folder, removed after).") var out: String?
    @Flag(help: "Also play the fleet as one process and compare the results.") var compare = false

    public init() {}

    public func validate() throws {
        guard (1...2_000_000).contains(devices), (1...100_000).contains(arrival), (1...100_000).contains(rate) else {
            throw ValidationError("--devices 1–2,000,000, --arrival and --rate 1–100,000")
        }
        guard (2...64).contains(shards) else { throw ValidationError("--shards 2–64") }
        _ = try Bench.duration(duration, flag: "--duration")
    }

    public func run() async throws {
        let folder = out ?? FileManager.default.temporaryDirectory.appendingPathComponent("pushfleet-bench-shards-\(UUID().uuidString)").path
        let scenarioFile = FileManager.default.temporaryDirectory.appendingPathComponent("bench-shards-\(UUID().uuidString).yaml").path
        defer {
            try? FileManager.default.removeItem(atPath: scenarioFile)
            if out == nil { try? FileManager.default.removeItem(atPath: folder) }
        }
        let yaml = """
            name: bench-shards
            seed: 1
            target: embedded
            fleet:
              users: \(devices)
              devices_per_user: 1
              platforms: { apns: 60, fcm: 30, wns: 10 }
              arrival: { rate: \(arrival)/s }
              push_channel: multiplexed
              connections: 64
            lifecycle: [login, register, connect, receive, fetch_secure]
            timeouts: { connect: 60s, register: 60s }
            traffic:
              - { name: secure, kind: secure, rate: \(rate)/s, duration: \(duration) }
            deadline: 5s
            grace: 5s
            """
        try yaml.write(toFile: scenarioFile, atomically: true, encoding: .utf8)
        var arguments = ["shards", scenarioFile, "--local", String(shards), "--out", folder, "--quiet"]
        if compare { arguments.append("--compare") }
        let ended = try await Self.playShards(arguments)

        var table: [(String, String)] = []
        var peak: UInt64 = 0
        for index in 0..<shards {
            let path = (folder as NSString).appendingPathComponent("shard-\(index)-of-\(shards)/\(ShardManifest.fileName)")
            guard let data = FileManager.default.contents(atPath: path), let manifest = try? JSONDecoder().decode(ShardManifest.self, from: data) else {
                table.append(("shard \(index)/\(shards)", "no shard.json"))
                continue
            }
            let rss = manifest.peakResidentBytes ?? 0
            peak = max(peak, rss)
            table.append(
                (
                    "shard \(index)/\(shards)",
                    String(
                        format: "%@ devices, ramp %.1f s, peak RSS %.1f MiB (%.2f KB/device incl. the runtime), tape %@ events / %.1f MiB",
                        manifest.devices.grouped, manifest.info?.trafficStartSecond ?? 0, Double(rss) / 1_048_576,
                        Double(rss) / 1024 / Double(max(1, manifest.devices)), (manifest.tape?.events ?? 0).grouped,
                        Double(manifest.tape?.bytes ?? 0) / 1_048_576
                    )
                )
            )
        }
        table.append(("largest shard's peak RSS", String(format: "%.1f MiB", Double(peak) / 1_048_576)))
        Bench.printFigures("bench shards (\(devices.grouped) devices as \(shards) local shards, multiplexed)", table)
        // The shards' own verdict, as `pushfleet shards` gave it (99: the single run disagreed).
        switch ended {
        case .exited(0): return
        case .exited(let code): throw ExitCode(code)
        case .signaled(let signal): throw BenchFailure("pushfleet shards ended on signal \(signal)")
        }
    }

    /// `pushfleet shards` in a child process, its output straight to this process's: the command
    /// is the CLI's, and the bench reads only the folder it leaves.
    private static func playShards(_ arguments: [String]) async throws -> TerminationStatus {
        // A SIGINT or SIGTERM to the bench is the shards' to act on; the bench then prints what they left.
        let child = Mutex<Int32?>(nil)
        let signals = SignalWatcher { name in
            if let pid = child.withLock({ $0 }) { kill(pid, name == "SIGTERM" ? SIGTERM : SIGINT) }
        }
        defer { signals.cancel() }
        let result = try await Subprocess.run(
            .path(FilePath(PushFleetExecutable.path)), arguments: Arguments(arguments), input: .none, output: .currentStandardOutput,
            error: .currentStandardError
        ) { execution in child.withLock { $0 = execution.processIdentifier.value } }
        child.withLock { $0 = nil }
        return result.terminationStatus
    }
}
