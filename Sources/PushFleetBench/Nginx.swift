import ArgumentParser
import Foundation
import Subprocess
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// A throwaway nginx answering 200 "ok" on 127.0.0.1 with one worker.
struct Nginx: Sendable {
    let port: Int

    /// Starts `binary` on a free-looking port, runs `body` once it is up, then stops it (SIGTERM)
    /// and waits for it to exit.
    static func run<Result: Sendable>(_ binary: String, _ body: (Nginx) async throws -> Result) async throws -> Result {
        let prefix = FileManager.default.temporaryDirectory.appendingPathComponent("pf-nginx-\(getpid())").path
        try FileManager.default.createDirectory(atPath: prefix + "/logs", withIntermediateDirectories: true)
        let port = Int.random(in: 20_000...30_000)
        let conf = """
            worker_processes 1; daemon off; pid \(prefix)/nginx.pid; error_log \(prefix)/logs/error.log;
            worker_rlimit_nofile 20000; events { worker_connections 16384; }
            http { access_log off; keepalive_requests 1000000;
              server { listen 127.0.0.1:\(port); location / { return 200 "ok"; } } }
            """
        try conf.write(toFile: prefix + "/nginx.conf", atomically: true, encoding: .utf8)
        var options = PlatformOptions()
        // Should the bench throw or be cancelled: SIGTERM as on a normal stop, then SIGKILL.
        options.teardownSequence = [.gracefulShutDown(allowedDurationToNextStep: .seconds(5))]
        return try await Subprocess.run(
            .path(FilePath(binary)), arguments: ["-p", prefix, "-c", prefix + "/nginx.conf"], platformOptions: options,
            input: .none, output: .currentStandardOutput, error: .currentStandardError
        ) { execution in
            try await Task.sleep(for: .milliseconds(500))
            guard !hasExited(execution.processIdentifier.value) else { throw ValidationError("nginx did not start; see \(prefix)/logs/error.log") }
            let result = try await body(Nginx(port: port))
            try? execution.send(signal: .terminate)
            return result
        }.closureResult
    }

    /// Whether the child has ended (on a taken port, say), leaving it for swift-subprocess to reap.
    private static func hasExited(_ pid: pid_t) -> Bool {
        var info = siginfo_t()
        return waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info._sifields._sigchld.si_pid == pid
    }
}
