import Foundation
import PushFleetLauncher
import Subprocess
import SystemPackage

/// Locust's resident memory per user: FastHttpUser users that each open a keep-alive connection
/// to a local nginx and then wait, at two fleet sizes; the slope between them.
enum LocustMemory {
    static let baseUsers = 1000

    /// Bytes per user; nil when Locust or nginx is missing or the two sizes gave no slope.
    static func perUser(users: Int) async -> Double? {
        guard users > baseUsers, let locust = await ReferenceTool.locust.find(), let nginx = await ReferenceTool.nginx.find() else { return nil }
        return try? await Nginx.run(nginx) { nginx in await perUser(users: users, locust: locust, port: nginx.port) }
    }

    private static func perUser(users: Int, locust: String, port: Int) async -> Double? {
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
        func resident(_ count: Int) async -> Double? {
            let arguments = ["-f", file, "--headless", "-u", "\(count)", "-r", "1000", "-t", "600s", "--host", "http://127.0.0.1:\(port)", "--only-summary"]
            let measured = try? await Subprocess.run(
                .path(FilePath(locust)), arguments: Arguments(arguments), input: .none, output: .discarded, error: .discarded
            ) { execution in
                try? await Task.sleep(for: .seconds(Double(count) / 1000 + 8))
                let bytes = ServerProcess.residentBytes(pid: execution.processIdentifier.value)
                // Only its memory is wanted: it is not left to finish.
                try? execution.send(signal: .kill)
                return bytes
            }
            guard let bytes = measured?.closureResult, bytes > 0 else { return nil }
            return Double(bytes)
        }
        FileHandleOutput.standardError("measuring Locust's memory per user (\(baseUsers) and \(users) users) …")
        guard let small = await resident(baseUsers), let large = await resident(users), large > small else { return nil }
        return (large - small) / Double(users - baseUsers)
    }
}
