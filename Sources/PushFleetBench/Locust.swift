import Foundation
import PushFleetEngine

/// Locust's FastHttpUser (PyPI's locust) as fast as it goes: the Python reference for `bench http`.
enum Locust {
    /// Requests `connections` users with no wait time got answered for `seconds`, from Locust's
    /// own statistics, and the CPU it spent.
    static func measure(_ locust: String, port: Int, connections: Int, seconds: Double) async throws -> HTTPMeasurement {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pf-locust-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("locustfile.py").path
        try """
            from locust import constant, task
            from locust.contrib.fasthttp import FastHttpUser

            class Fast(FastHttpUser):
                wait_time = constant(0)

                @task
                def get(self):
                    self.client.get("/")
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let before = CPUTime.children()
        let started = Date()
        _ = try? await ReferenceTool.run(locust, [
            "-f", file, "--headless", "-u", "\(connections)", "-r", "\(connections)", "-t", "\(Int(seconds))s", "--host", "http://127.0.0.1:\(port)",
            "--csv", directory.appendingPathComponent("out").path, "--only-summary",
        ])
        let cpu = CPUTime.children() - before
        let stats = (try? String(contentsOfFile: directory.appendingPathComponent("out_stats.csv").path, encoding: .utf8)) ?? ""
        let aggregated = stats.split(whereSeparator: \.isNewline).first { $0.contains("Aggregated") }?.split(separator: ",", omittingEmptySubsequences: false)
        return HTTPMeasurement(
            tool: "Locust FastHttpUser (Python)", requests: aggregated.flatMap { Double($0[2]) } ?? 0, cpu: cpu, wall: Date().timeIntervalSince(started)
        )
    }
}
