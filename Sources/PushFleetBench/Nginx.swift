import ArgumentParser
import Foundation

/// A throwaway nginx answering 200 "ok" on 127.0.0.1 with one worker.
final class Nginx: Sendable {
    let process: Process
    let port: Int

    private init(process: Process, port: Int) {
        self.process = process
        self.port = port
    }

    /// Starts `binary` on a free-looking port.
    static func start(_ binary: String) throws -> Nginx {
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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-p", prefix, "-c", prefix + "/nginx.conf"]
        try process.run()
        Thread.sleep(forTimeInterval: 0.5)
        guard process.isRunning else { throw ValidationError("nginx did not start; see \(prefix)/logs/error.log") }
        return Nginx(process: process, port: port)
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
