import Foundation
import PushFleetLauncher
import Subprocess
import SystemPackage

/// The reference tools the benchmarks run beside pushfleet. scripts/install-bench-tools installs
/// them; a bench only looks for them, and names the script when one is missing.
enum ReferenceTool: String {
    case nginx, wrk, h2load, locust

    /// Where the tool comes from, for the message when it is missing.
    var source: String {
        switch self {
        case .nginx: "Debian's nginx"
        case .wrk: "Debian's wrk"
        case .h2load: "Debian's nghttp2-client"
        case .locust: "PyPI's locust"
        }
    }

    /// The virtualenv scripts/install-bench-tools installs PyPI's tools into.
    static var folder: String {
        let environment = ProcessInfo.processInfo.environment
        if let folder = environment["PUSHFLEET_TOOLS"], !folder.isEmpty { return folder }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.cache/pushfleet/tools"
    }

    /// The tool's path; nil, saying which tool is missing and how to get it, when it is nowhere
    /// a bench looks.
    func find() async -> String? {
        if let path = await Self.locate(rawValue) { return path }
        FileHandleOutput.standardError("\(rawValue) is missing (\(source)): run scripts/install-bench-tools")
        return nil
    }

    /// The first executable `name` in the tools' folder, on PATH, in the system folders, or
    /// where python3 puts console scripts.
    static func locate(_ name: String) async -> String? {
        var paths = [folder + "/bin"]
        paths += (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        paths += ["/usr/sbin", "/usr/local/bin", "/sbin"]
        if let path = executable(name, in: paths) { return path }
        // A `pip install` of one's own puts console scripts next to the interpreter, which a
        // pyenv shim may not cover yet.
        guard let python = executable("python3", in: paths),
            let scripts = try? await run(python, ["-c", "import sysconfig; print(sysconfig.get_path('scripts'))"]), scripts.status == 0
        else { return nil }
        return executable(name, in: [scripts.output.trimmingCharacters(in: .whitespacesAndNewlines)])
    }

    private static func executable(_ name: String, in paths: [String]) -> String? {
        paths.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs the tool to its end; its exit status (128 + the signal when one ended it) and what it
    /// wrote to standard output and error.
    @discardableResult
    static func run(_ path: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let result = try await Subprocess.run(
            .path(FilePath(path)), arguments: Arguments(arguments), input: .none, output: .string(limit: 16 << 20), error: .combinedWithOutput
        )
        switch result.terminationStatus {
        case .exited(let code): return (code, result.standardOutput)
        case .signaled(let signal): return (128 + signal, result.standardOutput)
        }
    }
}
