import ArgumentParser
import Foundation
import PushFleetLauncher
import Subprocess
import SystemPackage

/// `pushfleet serve` in a child process on free ports, for as long as a piece of work needs it.
public struct ServerProcess: Sendable {
    /// The child's process id: its memory and CPU are read from /proc.
    let pid: Int32
    public let backend: String
    public let pushService: String

    /// Starts `pushfleet serve` with `arguments` added, runs `body` once the server has printed
    /// its addresses, then stops it with SIGINT and waits for it to exit.
    public static func run<Result: Sendable>(arguments extra: [String] = [], _ body: (ServerProcess) async throws -> Result) async throws -> Result {
        var options = PlatformOptions()
        // Should the work be cancelled: SIGINT as on a normal stop, then SIGKILL 10 s on.
        options.teardownSequence = [.send(signal: .interrupt, allowedDurationToNextStep: .seconds(10))]
        // The admin API open (loopback only): the fleet reads the push service's load and sets
        // its faults without a token.
        let arguments = ["serve", "--backend-listen", "127.0.0.1:0", "--pns-listen", "127.0.0.1:0", "--admin-auth", "off", "--log-level", "warning"] + extra
        return try await Subprocess.run(
            .path(FilePath(PushFleetExecutable.path)), arguments: Arguments(arguments), platformOptions: options,
            input: .none, output: .sequence, error: .currentStandardError
        ) { execution in
            let (addresses, report) = AsyncStream.makeStream(of: (backend: String, pushService: String).self)
            return try await withThrowingTaskGroup(of: Void.self, returning: Result.self) { group in
                // Its standard output is read to the end, so that the server never blocks on a full pipe.
                group.addTask {
                    defer { report.finish() }
                    var backend: String?
                    var pushService: String?
                    for try await line in execution.standardOutput.strings() where backend == nil || pushService == nil {
                        // The address is the line's URL; words may follow it (`(store: memory)`).
                        let url = line.split(separator: " ").first { $0.hasPrefix("http://") || $0.hasPrefix("https://") }.map(String.init)
                        if line.hasPrefix("backend:") { backend = url }
                        if line.hasPrefix("push service:") { pushService = url }
                        if let backend, let pushService { report.yield((backend, pushService)) }
                    }
                }
                let deadline = Task {
                    try await Task.sleep(for: .seconds(30))
                    report.finish()
                }
                var reports = addresses.makeAsyncIterator()
                let reported = await reports.next()
                deadline.cancel()
                let outcome: Swift.Result<Result, any Error>
                if let reported {
                    let server = ServerProcess(pid: execution.processIdentifier.value, backend: reported.backend, pushService: reported.pushService)
                    do { outcome = .success(try await body(server)) } catch { outcome = .failure(error) }
                    try? execution.send(signal: .interrupt)
                } else if (try? await deadline.value) != nil {
                    try? execution.send(signal: .terminate)
                    outcome = .failure(ValidationError("the server process did not report its addresses"))
                } else {
                    outcome = .failure(ValidationError("the server process exited early"))
                }
                // The reader ends with the server's output, when it has exited.
                try await group.waitForAll()
                return try outcome.get()
            }
        }.closureResult
    }

    /// Resident memory of the server process, from /proc.
    func residentBytes() -> UInt64 {
        Self.residentBytes(pid: pid)
    }

    /// CPU seconds (user + system) the server process has spent, from /proc.
    public func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The server process's threads' context switches so far, from /proc.
    func contextSwitches() -> ContextSwitches {
        ContextSwitches.of(String(pid)) ?? ContextSwitches()
    }

    /// The server process's peak resident memory (VmHWM), from /proc.
    public func peakResidentBytes() -> UInt64 {
        ProcessMemory.peakResident(String(pid)) ?? 0
    }

    static func residentBytes(pid: Int32) -> UInt64 {
        ProcessMemory.resident(String(pid)) ?? 0
    }
}
