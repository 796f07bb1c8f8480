import ArgumentParser
import Foundation
import PushFleetLauncher

/// A benchmark whose own run went wrong (as opposed to a target not met): exit 1.
struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
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

    static func start(arguments extra: [String] = []) throws -> ServerProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        if !FileManager.default.isExecutableFile(atPath: process.executableURL!.path) {
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        }
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
    func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The server process's peak resident memory (VmHWM), from /proc.
    func peakResidentBytes() -> UInt64 {
        ProcessMemory.peakResident(String(process.processIdentifier)) ?? 0
    }

    static func residentBytes(pid: Int32) -> UInt64 {
        ProcessMemory.resident(String(pid)) ?? 0
    }

    func stop() {
        process.interrupt()
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
