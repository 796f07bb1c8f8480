import Foundation
import PushFleetLauncher

/// The reference tools the benchmarks run beside pushfleet: found on PATH, or installed from
/// their registry (Debian's packages, PyPI) when missing.
enum ReferenceTool {
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

    /// Runs the tool to its end; its exit status and what it wrote to standard output and error.
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
