import Foundation
import PushFleetLauncher

/// Locust's resident memory per user: FastHttpUser users that each open a keep-alive connection
/// to a local nginx and then wait, at two fleet sizes; the slope between them.
enum LocustMemory {
    static let baseUsers = 1000

    /// Bytes per user; nil when Locust or nginx is missing or the two sizes gave no slope.
    static func perUser(users: Int) -> Double? {
        guard users > baseUsers, let locust = ReferenceTool.locust.find(), let binary = ReferenceTool.nginx.find(),
            let nginx = try? Nginx.start(binary)
        else { return nil }
        defer { nginx.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pf-locust-mem-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("locustfile.py").path
        let script = """
            from locust import constant, task
            from locust.contrib.fasthttp import FastHttpUser

            class Idle(FastHttpUser):
                wait_time = constant(3600)

                def on_start(self):
                    self.client.get("/")

                @task
                def idle(self):
                    pass
            """
        guard (try? script.write(toFile: file, atomically: true, encoding: .utf8)) != nil else { return nil }
        func resident(_ count: Int) -> Double? {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: locust)
            process.arguments = ["-f", file, "--headless", "-u", "\(count)", "-r", "1000", "-t", "600s", "--host", "http://127.0.0.1:\(nginx.port)", "--only-summary"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            guard (try? process.run()) != nil else { return nil }
            defer {
                // Only its memory is wanted, and it inherits this process's ignored SIGINT/SIGTERM.
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            Thread.sleep(forTimeInterval: Double(count) / 1000 + 8)
            let bytes = ServerProcess.residentBytes(pid: process.processIdentifier)
            return bytes > 0 ? Double(bytes) : nil
        }
        FileHandleOutput.standardError("measuring Locust's memory per user (\(baseUsers) and \(users) users) …")
        guard let small = resident(baseUsers), let large = resident(users), large > small else { return nil }
        return (large - small) / Double(users - baseUsers)
    }
}
