package import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL server from Debian's packages, started for a test in a temporary directory on a
/// free loopback port, with trust authentication; `stop()` removes it. When the binaries are
/// missing it installs them (apt-get), and fails with the reason if it cannot.
package final class TestPostgres: Sendable {
    package let port: Int
    package let directory: URL
    package let bin: String
    package let user: String

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    package var url: String { "postgres://\(user)@127.0.0.1:\(port)/postgres" }

    private init(port: Int, directory: URL, bin: String, user: String) {
        self.port = port
        self.directory = directory
        self.bin = bin
        self.user = user
    }

    package static func binaries() throws -> String {
        func find() -> String? {
            let root = "/usr/lib/postgresql"
            let versions = (try? FileManager.default.contentsOfDirectory(atPath: root))?.sorted { (Int($0) ?? 0) > (Int($1) ?? 0) } ?? []
            return versions.map { "\(root)/\($0)/bin" }.first { FileManager.default.isExecutableFile(atPath: "\($0)/initdb") }
        }
        if let found = find() { return found }
        let install = try shell("bash", ["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql"])
        guard let found = find() else {
            throw Failure(description: "PostgreSQL is not installed and apt-get could not install it: \(install.output.suffix(500))")
        }
        return found
    }

    package static func start() async throws -> TestPostgres {
        try await offPool { try startBlocking() }
    }

    private static func startBlocking() throws -> TestPostgres {
        let bin = try binaries()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pf-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // PostgreSQL refuses to run as root: as root, run it as the postgres user.
        let asRoot = getuid() == 0
        let user = asRoot ? "postgres" : (ProcessInfo.processInfo.environment["USER"] ?? "postgres")
        if asRoot { _ = try shell("chown", ["-R", "postgres:postgres", directory.path]) }
        func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
            asRoot ? try shell("runuser", ["-u", "postgres", "--", "\(bin)/\(tool)"] + arguments) : try shell("\(bin)/\(tool)", arguments)
        }
        let data = directory.appendingPathComponent("data").path
        let initdb = try run("initdb", ["-D", data, "-A", "trust", "-U", user, "--no-sync"])
        guard initdb.status == 0 else { throw Failure(description: "initdb failed: \(initdb.output.suffix(800))") }
        for _ in 0..<5 {
            let port = Int.random(in: 20_000...29_999)
            let options = "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c fsync=off"
            let started = try run("pg_ctl", ["-D", data, "-o", options, "-l", directory.appendingPathComponent("log").path, "-w", "-t", "30", "start"])
            if started.status == 0 { return TestPostgres(port: port, directory: directory, bin: bin, user: user) }
        }
        let log = (try? String(contentsOf: directory.appendingPathComponent("log"), encoding: .utf8)) ?? ""
        throw Failure(description: "PostgreSQL did not start: \(log.suffix(800))")
    }

    package func stop() async {
        let data = directory.appendingPathComponent("data").path
        let bin = bin
        let directory = directory
        _ = try? await offPool {
            if getuid() == 0 {
                _ = try TestPostgres.shell("runuser", ["-u", "postgres", "--", "\(bin)/pg_ctl", "-D", data, "-m", "immediate", "stop"])
            } else {
                _ = try TestPostgres.shell("\(bin)/pg_ctl", ["-D", data, "-m", "immediate", "stop"])
            }
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// Runs a tool to its end with posix_spawn and waitpid. Output goes to a file, not a pipe:
    /// the server `pg_ctl` starts inherits the descriptors and would hold a pipe open for its
    /// whole life.
    @discardableResult
    package static func shell(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("pf-shell-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = (["/usr/bin/env", tool] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, "/usr/bin/env", &actions, nil, argv, environ)
        guard spawned == 0 else { throw Failure(description: "cannot start \(tool): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (exitStatus, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }
}
