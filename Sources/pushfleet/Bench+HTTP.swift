import ArgumentParser
import Foundation
import PushFleetClients
import PushFleetCore
import PushFleetEngine

/// HTTP generation efficiency: requests per generator CPU-second against a trivial nginx
/// endpoint, pushfleet's request path beside wrk and Locust's FastHttpUser in one invocation.
struct HTTPBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http",
        abstract: "Requests per generator CPU-second against local nginx: pushfleet vs wrk vs Locust FastHttpUser.",
        discussion: "Runs Debian's nginx and wrk and PyPI's locust, installing any that is missing unless --no-install is given."
    )

    @Option(help: "Length of each tool's run.") var duration = "15s"
    @Option(help: "Concurrent connections (users for Locust).") var connections = 64
    @Flag(help: "Do not install missing reference tools.") var noInstall = false

    func validate() throws {
        guard (1...10_000).contains(connections) else { throw ValidationError("--connections must be 1 to 10000") }
        guard try DurationText.parse(duration) >= .seconds(1) else { throw ValidationError("--duration must be at least 1s") }
    }

    /// One tool's run: requests answered, the generator's CPU seconds, wall seconds.
    private struct Measurement {
        let tool: String
        let requests: Double
        let cpu: Double
        let wall: Double

        var perCPU: Double { requests / max(cpu, 0.001) }
    }

    func run() async throws {
        let seconds = try DurationText.parse(duration).seconds
        let nginx = try Nginx.start(install: !noInstall)
        defer { nginx.stop() }
        let url = "http://127.0.0.1:\(nginx.port)/"
        var rows: [Measurement] = []
        if let wrk = Tool.ensure("wrk", from: .debian("wrk"), install: !noInstall) {
            rows.append(try measureWrk(wrk, url: url, seconds: seconds))
        }
        let own = await measurePushfleet(port: nginx.port, seconds: seconds)
        rows += own
        if let locust = Tool.ensure("locust", from: .pypi("locust"), install: !noInstall) {
            rows.append(try measureLocust(locust, port: nginx.port, seconds: seconds))
        }
        FileHandleOutput.standardOutput(table(rows, url: url).joined(separator: "\n"))
        guard own.allSatisfy({ $0.requests > 0 }) else { throw BenchFailure("pushfleet got no answers from nginx") }
    }

    private func measureWrk(_ wrk: String, url: String, seconds: Double) throws -> Measurement {
        let before = CPUTime.children()
        let started = Date()
        let output = try Tool.run(wrk, ["-t1", "-c\(connections)", "-d\(Int(seconds))s", url]).output
        let cpu = CPUTime.children() - before
        let requests = output.split(separator: "\n").first { $0.contains("requests in") }
            .flatMap { Double($0.trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") } ?? 0
        return Measurement(tool: "wrk -t1 (C)", requests: requests, cpu: cpu, wall: Date().timeIntervalSince(started))
    }

    /// pushfleet's request path: the BackendClient every device and sender uses, its loops on
    /// the client's event loop, then on Swift's pool as a run's tasks are.
    private func measurePushfleet(port: Int, seconds: Double) async -> [Measurement] {
        var rows: [Measurement] = []
        for (onEventLoop, label) in [(true, "pushfleet (fleet HTTP client)"), (false, "pushfleet, tasks on Swift's pool")] {
            let before = CPUTime.own()
            let started = Date()
            let answered = await HTTPLoad.run(
                baseURL: "http://127.0.0.1:\(port)", path: "/", connections: connections, duration: .nanoseconds(Int64(seconds * 1e9)),
                onEventLoop: onEventLoop
            )
            rows.append(Measurement(tool: label, requests: Double(answered), cpu: CPUTime.own() - before, wall: Date().timeIntervalSince(started)))
        }
        return rows
    }

    private func measureLocust(_ locust: String, port: Int, seconds: Double) throws -> Measurement {
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
        _ = try? Tool.run(locust, [
            "-f", file, "--headless", "-u", "\(connections)", "-r", "\(connections)", "-t", "\(Int(seconds))s", "--host", "http://127.0.0.1:\(port)",
            "--csv", directory.appendingPathComponent("out").path, "--only-summary",
        ])
        let cpu = CPUTime.children() - before
        let stats = (try? String(contentsOfFile: directory.appendingPathComponent("out_stats.csv").path, encoding: .utf8)) ?? ""
        let aggregated = stats.split(whereSeparator: \.isNewline).first { $0.contains("Aggregated") }?.split(separator: ",", omittingEmptySubsequences: false)
        return Measurement(
            tool: "Locust FastHttpUser (Python)", requests: aggregated.flatMap { Double($0[2]) } ?? 0, cpu: cpu, wall: Date().timeIntervalSince(started)
        )
    }

    /// The rows side by side, each rate also as a multiple of wrk's and Locust's, then the targets.
    private func table(_ rows: [Measurement], url: String) -> [String] {
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
        for (label, own) in [("on its event loop", perCPU("pushfleet (") ?? 0), ("on Swift's pool", perCPU("pushfleet,") ?? 0)] {
            lines.append("targets, pushfleet \(label): ≥ 0.25 × wrk: " + (wrkRate.map { own / $0 >= 0.25 ? "met" : "NOT met" } ?? "not measured (no wrk)")
                + "; ≥ 5 × Locust FastHttpUser: " + (locustRate.map { own / $0 >= 5 ? "met" : "NOT met" } ?? "not measured (no locust)"))
        }
        return lines
    }
}

/// A throwaway nginx answering 200 "ok" on 127.0.0.1 with one worker.
final class Nginx: Sendable {
    let process: Process
    let port: Int

    private init(process: Process, port: Int) {
        self.process = process
        self.port = port
    }

    static func start(install: Bool) throws -> Nginx {
        guard let binary = Tool.ensure("nginx", from: .debian("nginx"), install: install) else {
            throw ValidationError("nginx is needed as the benchmark's target and is missing (apt-get install nginx)")
        }
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
