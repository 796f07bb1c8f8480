import Foundation
import PushFleetTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the command line says before anything connects: a fleet the open-files limit or the
/// embedded push service's device cap cannot hold is refused by `validate` as by `run`; `serve`
/// prints each port's caps; a metrics address that is taken names the flag.
@Suite("Open files and caps")
struct FileLimitCLITests {
    /// `pushfleet ARGS` with the open-files limit (soft and hard) at `openFiles`.
    static func run(_ arguments: [String], openFiles: Int, in directory: URL) async throws -> CLITests.Outcome {
        let shell = "cd '\(directory.path)' && exec prlimit --nofile=\(openFiles):\(openFiles) '\(CLITests.binary)' "
            + arguments.map { "'\($0)'" }.joined(separator: " ")
        let outcome = try await ChildProcess.run("sh", ["-c", shell], limit: .seconds(60))
        return CLITests.Outcome(status: outcome.status, output: outcome.text)
    }

    static func scenario(devices: Int, channel: String = "per_device") -> String {
        """
        name: big
        fleet:
          users: \(devices)
          devices_per_user: 1
          platforms: { apns: 1 }
          push_channel: \(channel)
        lifecycle: [login, register, connect, receive]
        traffic:
          - { kind: plain, rate: 1/s, duration: 1s }
        """
    }

    @Test("validate refuses a fleet the open-files limit cannot hold, as run does, with the numbers")
    func validateOpenFiles() async throws {
        let directory = try CLITests.temporaryDirectory()
        try Self.scenario(devices: 2_000).write(to: directory.appendingPathComponent("big.yaml"), atomically: true, encoding: .utf8)
        let validate = try await Self.run(["validate", "big.yaml"], openFiles: 1_024, in: directory)
        #expect(validate.status == 2, "\(validate.output)")
        #expect(validate.output.contains("big.yaml: this scenario needs about") && validate.output.contains("but the limit is 1024"), "\(validate.output)")
        #expect(!validate.output.contains("ok: big.yaml"))
        let run = try await Self.run(["run", "big.yaml"], openFiles: 1_024, in: directory)
        #expect(run.status == 2 && run.output.contains("but the limit is 1024"), "\(run.output)")
        // The same fleet on shared sockets fits.
        try Self.scenario(devices: 2_000, channel: "multiplexed").write(to: directory.appendingPathComponent("mux.yaml"), atomically: true, encoding: .utf8)
        let mux = try await Self.run(["validate", "mux.yaml"], openFiles: 1_024, in: directory)
        #expect(mux.status == 0 && mux.output.contains("ok: mux.yaml"), "\(mux.output)")
    }

    @Test("validate refuses a fleet past the embedded push service's device cap though the open files would do")
    func validateDeviceCap() async throws {
        // 4,096 open files: the push port serves 2,016 connections, 1,815 of them devices; 1,820
        // devices need 2 × 1,820 + 448 = 4,088 descriptors, which fit.
        let directory = try CLITests.temporaryDirectory()
        try Self.scenario(devices: 1_820).write(to: directory.appendingPathComponent("edge.yaml"), atomically: true, encoding: .utf8)
        let validate = try await Self.run(["validate", "edge.yaml"], openFiles: 4_096, in: directory)
        #expect(validate.status == 2, "\(validate.output)")
        #expect(validate.output.contains("takes at most 1,815 device sockets"), "\(validate.output)")
        #expect(validate.output.contains("5 devices would be refused at connect (connect:at_capacity)"), "\(validate.output)")
        try Self.scenario(devices: 1_815).write(to: directory.appendingPathComponent("fits.yaml"), atomically: true, encoding: .utf8)
        let fits = try await Self.run(["validate", "fits.yaml"], openFiles: 4_096, in: directory)
        #expect(fits.status == 0, "\(fits.output)")
    }

    @Test("serve at 1,024 open files says its event loops, each port's caps, the device share and the limit at start")
    func serveCaps() async throws {
        let directory = try CLITests.temporaryDirectory()
        let shell = "exec prlimit --nofile=1024:1024 '\(CLITests.binary)' serve --backend-listen 127.0.0.1:0 --pns-listen 127.0.0.1:0 --event-loops 3"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", shell]
        process.currentDirectoryURL = directory
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        let output = try await offPool { () -> String in
            var text = ""
            let deadline = Date().addingTimeInterval(30)
            while !text.contains("open-files limit") && Date() < deadline && process.isRunning {
                let data = pipe.fileHandleForReading.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            return text
        }
        // Counted from NIO's group: the flag reached it before the first task.
        #expect(output.contains("event loops: 3\n"), "\(output)")
        #expect(output.contains("backend connections: 480 at once"), "\(output)")
        #expect(
            output.contains("push service connections: 480 at once, of which device sockets 352 (the other 128 kept for providers, hub and admin)"),
            "\(output)"
        )
        #expect(output.contains("open-files limit: 1,024 (hard 1,024)"), "\(output)")
    }

    @Test("serve refuses a device cap that leaves providers nothing")
    func deviceCapFlag() async throws {
        let directory = try CLITests.temporaryDirectory()
        let over = try await CLITests.run(["serve", "--max-connections", "100", "--max-device-connections", "100"], in: directory)
        #expect(over.status == 2 && over.output.contains("--max-device-connections 100 must be below --max-connections 100"), "\(over.output)")
        let zero = try await CLITests.run(["serve", "--max-device-connections", "0"], in: directory)
        #expect(zero.status == 2 && zero.output.contains("--max-device-connections must be between 1 and"), "\(zero.output)")
    }

    @Test("--metrics-listen on a port another process holds names the flag and the port, and exits 2")
    func metricsPortTaken() async throws {
        let directory = try CLITests.temporaryDirectory()
        try Self.scenario(devices: 2).write(to: directory.appendingPathComponent("small.yaml"), atomically: true, encoding: .utf8)
        let (fd, port) = try Self.listeningSocket()
        defer { close(fd) }
        let run = try await CLITests.run(["run", "--quiet", "--metrics-listen", "127.0.0.1:\(port)", "small.yaml"], in: directory)
        #expect(run.status == 2, "\(run.output)")
        #expect(
            run.output.contains("--metrics-listen 127.0.0.1:\(port): cannot listen on port \(port) (address already in use)"),
            "\(run.output)"
        )
        #expect(!run.output.contains("IOError"), "\(run.output)")
    }

    /// A socket listening on a free loopback port, as another process's would.
    static func listeningSocket() throws -> (Int32, Int) {
        struct Failure: Error {}
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure() }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            close(fd)
            throw Failure()
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}
