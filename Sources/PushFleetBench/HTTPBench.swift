public import ArgumentParser
import Foundation
import PushFleetClients
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher

/// HTTP generation efficiency: requests per generator CPU-second against a trivial nginx
/// endpoint, pushfleet's request path beside wrk, AsyncHTTPClient and Locust's FastHttpUser in one
/// invocation.
public struct HTTPBench: AsyncParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "http",
        abstract: "Requests per generator CPU-second against local nginx: pushfleet vs wrk, AsyncHTTPClient and Locust FastHttpUser.",
        discussion: "Runs Debian's nginx and wrk and PyPI's locust, as scripts/install-bench-tools installs them; a missing wrk or locust leaves its row out."
    )

    @Option(help: "Length of each tool's run.") var duration = "15s"
    @Option(help: "Concurrent connections (users for Locust).") var connections = 64

    public init() {}

    public func validate() throws {
        guard (1...10_000).contains(connections) else { throw ValidationError("--connections must be 1 to 10000") }
        guard try Bench.duration(duration, flag: "--duration") >= .seconds(1) else { throw ValidationError("--duration must be at least 1s") }
    }

    public func run() async throws {
        let seconds = try Bench.duration(duration, flag: "--duration").seconds
        guard let binary = await ReferenceTool.nginx.find() else {
            throw ValidationError("nginx is needed as the benchmark's target and is missing: run scripts/install-bench-tools")
        }
        try await Nginx.run(binary) { nginx in
            let url = "http://127.0.0.1:\(nginx.port)/"
            var rows: [HTTPMeasurement] = []
            if let wrk = await ReferenceTool.wrk.find() {
                rows.append(try await Wrk.measure(wrk, url: url, connections: connections, seconds: seconds))
            }
            let own = await measurePushfleet(port: nginx.port, seconds: seconds)
            rows += own
            rows.append(try await measureAsyncHTTPClient(port: nginx.port, seconds: seconds))
            if let locust = await ReferenceTool.locust.find() {
                rows.append(try await Locust.measure(locust, port: nginx.port, connections: connections, seconds: seconds))
            }
            FileHandleOutput.standardOutput(table(rows, url: url).joined(separator: "\n"))
            guard own.allSatisfy({ $0.requests > 0 }) else { throw BenchFailure("pushfleet got no answers from nginx") }
        }
    }

    /// pushfleet's request path: the BackendClient every device and sender uses, its loops on
    /// the client's event loop (as a run's sends and fetches are), then on Swift's pool (as
    /// device setup is).
    private func measurePushfleet(port: Int, seconds: Double) async -> [HTTPMeasurement] {
        var rows: [HTTPMeasurement] = []
        for (onEventLoop, label) in [(true, "pushfleet (fleet HTTP client)"), (false, "pushfleet, tasks on Swift's pool")] {
            let before = CPUTime.own()
            let started = Date()
            let answered = await HTTPLoad.run(
                baseURL: "http://127.0.0.1:\(port)", path: "/", connections: connections, duration: .nanoseconds(Int64(seconds * 1e9)),
                onEventLoop: onEventLoop
            )
            rows.append(HTTPMeasurement(tool: label, requests: Double(answered), cpu: CPUTime.own() - before, wall: Date().timeIntervalSince(started)))
        }
        return rows
    }

    /// The rows side by side, each rate also as a multiple of wrk's and Locust's, then the targets.
    private func table(_ rows: [HTTPMeasurement], url: String) -> [String] {
        func perCPU(_ prefix: String) -> Double? {
            rows.first { $0.tool.hasPrefix(prefix) }.map(\.perCPU)
        }
        let wrkRate = perCPU("wrk")
        let locustRate = perCPU("Locust")
        var lines = ["", "bench http: GET \(url) (nginx, 1 worker), \(connections) connections, \(duration) each",
            "tool                              requests     req/s   CPU s   req/CPU-s   × wrk   × Locust"]
        for row in rows {
            let rate = row.perCPU
            let toWrk = wrkRate.map { String(format: "%5.2f", rate / $0) } ?? "    —"
            let toLocust = locustRate.map { String(format: "%8.2f", rate / $0) } ?? "       —"
            lines.append(
                row.tool.padding(toLength: 32, withPad: " ", startingAt: 0)
                    + String(format: "  %9.0f  %8.0f  %6.1f  %10.0f  ", row.requests, row.requests / row.wall, row.cpu, rate) + toWrk + "  " + toLocust
            )
        }
        // A run's sends and fetches take the event-loop path; device setup takes the pool's.
        let onLoop = perCPU("pushfleet (") ?? 0
        let onPool = perCPU("pushfleet,") ?? 0
        if let wrkRate {
            lines.append(
                "targets: the run's path (on its event loop) ≥ 0.6 × wrk: " + (onLoop / wrkRate >= 0.6 ? "met" : "NOT met")
                    + "; on its event loop ≥ 0.8 × wrk: " + (onLoop / wrkRate >= 0.8 ? "met" : "NOT met")
                    + String(format: " (%.2f×; device setup on Swift's pool %.2f×)", onLoop / wrkRate, onPool / wrkRate)
            )
        } else {
            lines.append("targets against wrk: not measured (no wrk)")
        }
        lines.append("target ≥ 5 × Locust FastHttpUser on its event loop: " + (locustRate.map { onLoop / $0 >= 5 ? "met" : "NOT met" } ?? "not measured (no locust)"))
        return lines
    }
}
