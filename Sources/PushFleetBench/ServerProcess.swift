import ArgumentParser
import Foundation
import PushFleetLauncher

/// `pushfleet serve` in a child process on free ports.
public final class ServerProcess: Sendable {
    let process: Process
    public let backend: String
    public let pushService: String

    private init(process: Process, backend: String, pushService: String) {
        self.process = process
        self.backend = backend
        self.pushService = pushService
    }

    public static func start(arguments extra: [String] = []) throws -> ServerProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: PushFleetExecutable.path)
        process.arguments = ["serve", "--backend-listen", "127.0.0.1:0", "--pns-listen", "127.0.0.1:0", "--log-level", "warning"] + extra
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

    /// CPU seconds (user + system) the server process has spent, from /proc.
    public func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The server process's peak resident memory (VmHWM), from /proc.
    public func peakResidentBytes() -> UInt64 {
        ProcessMemory.peakResident(String(process.processIdentifier)) ?? 0
    }

    static func residentBytes(pid: Int32) -> UInt64 {
        ProcessMemory.resident(String(pid)) ?? 0
    }

    public func stop() {
        process.interrupt()
        process.waitUntilExit()
    }
}
