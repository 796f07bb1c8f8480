import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOCore
import PushFleetCore
import PushFleetLauncher
import PushFleetLedger
import PushFleetMetrics
import PushFleetResults
import PushFleetScenario
import PushFleetServerSupport
import ServiceLifecycle

/// `--live`: the page (`GET /`), its Server-Sent Events stream (`GET /events`: `hello`, a
/// `frame` about once a second, `end` with the verdict) and the latest frame alone
/// (`GET /frame`), served by the run itself (docs/live.md).
enum LiveServer {
    /// `[HOST:]PORT`: a port alone listens on loopback.
    static func address(_ text: String) throws -> ListenAddress {
        if let port = Int(text) {
            guard (0...65_535).contains(port) else { throw ValidationError("--live: port \(port) is not between 0 and 65535") }
            return ListenAddress(host: "127.0.0.1", port: port)
        }
        do { return try ListenAddress(parsing: text) } catch { throw ValidationError("--live: \(error)") }
    }

    static func makeService(broadcast: LiveBroadcast, listen: ListenAddress, bound: Readiness<ListenAddress>, logger: Logger) -> any Service {
        let router = Router()
        router.get("/") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(string: LivePage.html))
            )
        }
        router.get("/frame") { _, _ in
            guard let latest = broadcast.latest else { return Response(status: .noContent) }
            return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"], body: .init(byteBuffer: latest))
        }
        router.get("/events") { request, _ in
            // `drop=N` ends the stream after N frames: a way to watch a page reconnect.
            let drop = request.uri.queryParameters.get("drop", as: Int.self).flatMap { (1...100_000).contains($0) ? $0 : nil }
            return Response(
                status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
                body: ResponseBody { writer in
                    let (id, backlog, stream) = broadcast.subscribe()
                    defer { broadcast.leave(id) }
                    var first = ByteBuffer(string: "retry: 1000\n\n")
                    for event in backlog { first.writeImmutableBuffer(event) }
                    try await writer.write(first)
                    if let stream {
                        var written = 0
                        for await event in stream {
                            try await writer.write(event)
                            broadcast.written(id)
                            written += 1
                            if let drop, written >= drop { break }
                        }
                    }
                    try await writer.finish(nil)
                }
            )
        }
        let application = Application(
            router: router, configuration: .init(address: .hostname(listen.host, port: listen.port), serverName: "pushfleet-live"),
            onServerRunning: { bound.succeed(ListenAddress(host: listen.host, port: $0.localAddress?.port ?? listen.port)) }, logger: logger
        )
        return ListenerService(application: application, flag: "--live", listen: listen, bound: bound)
    }

    /// Serves the page (when `--live` was given) while `body` runs; a port that cannot be had
    /// ends the command with exit 2, naming the flag.
    static func serving<T: Sendable>(
        _ broadcast: LiveBroadcast?, at live: String?, logger: Logger, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        guard let broadcast, let live else { return try await body() }
        let bound = Readiness<ListenAddress>()
        let service = makeService(broadcast: broadcast, listen: try address(live), bound: bound, logger: logger)
        do {
            return try await withServices([service], logger: logger) {
                FileHandleOutput.standardError("live: \(try await bound.value().httpURL)/")
                return try await body()
            }
        } catch let error as ListenError {
            FileHandleOutput.standardError("\(error)")
            throw ExitCode(ExitStatus.invalidInput)
        }
    }

    /// A capacity search's opening event: what it varies, its rules, its steps' window.
    static func hello(_ scenario: Scenario, capacity: Scenario.Capacity, window: Duration) -> ByteBuffer {
        var hello = Hello(
            runID: "", scenario: scenario.name, devices: scenario.fleet.users, deadlineSeconds: scenario.deadline.seconds, windowSeconds: window.seconds,
            rules: rules(scenario)
        )
        hello.capacity = .init(
            vary: capacity.vary.rawValue, unit: capacity.vary == .rate ? "sends/s" : "devices", warmupSeconds: capacity.warmup.seconds,
            windowSeconds: capacity.window.seconds
        )
        return LiveBroadcast.event("hello", data: (try? JSONEncoder().encode(hello)) ?? Data("{}".utf8))
    }

    static func stepStarted(_ index: Int, phase: String, load: Double) -> ByteBuffer {
        let data = (try? JSONSerialization.data(withJSONObject: ["index": index, "phase": phase, "load": load])) ?? Data("{}".utf8)
        return LiveBroadcast.event("step", data: data)
    }

    static func stepRecorded(_ step: CapacityStep, lastPass: Double?, firstFail: Double?) -> ByteBuffer {
        let data = (try? JSONEncoder().encode(StepDone(step: step, lastPass: lastPass, firstFail: firstFail))) ?? Data("{}".utf8)
        return LiveBroadcast.event("stepDone", data: data)
    }

    /// A capacity search's closing event.
    static func end(_ result: CapacityResult, exitCode: Int32, reports: String) -> ByteBuffer {
        let end = End(
            verdict: result.outcome, exitCode: Int(exitCode), reason: result.failure, failed: [], delivery: nil, reports: fileURL(reports),
            capacity: result.capacity, summary: result.summary
        )
        return LiveBroadcast.event("end", data: (try? JSONEncoder().encode(end)) ?? Data("{}".utf8))
    }

    static func rules(_ scenario: Scenario) -> [Hello.Rule] {
        let own = scenario.thresholds.count
        return scenario.effectiveThresholds.enumerated().map { .init(metric: $0.element.metric, expression: $0.element.expression, origin: $0.offset < own ? nil : "default") }
    }

    static func fileURL(_ path: String) -> String {
        String(URL(fileURLWithPath: path).standardizedFileURL.absoluteString.trimmingSuffix("/"))
    }

    /// The opening event: the run, its rules and the window the page's judgements cover.
    /// `shards`: a sharded run's count, followed from its folder.
    static func hello(_ scenario: Scenario, plan: FleetPlan, window: Duration, shards: Int? = nil) -> ByteBuffer {
        var hello = Hello(
            runID: plan.runID, scenario: scenario.name, devices: plan.devices.count, deadlineSeconds: scenario.deadline.seconds,
            windowSeconds: window.seconds, rules: rules(scenario)
        )
        hello.shards = shards
        return LiveBroadcast.event("hello", data: (try? JSONEncoder().encode(hello)) ?? Data("{}".utf8))
    }

    static func frame(_ frame: LiveFrame) -> (event: ByteBuffer, json: ByteBuffer) {
        let data = (try? JSONEncoder().encode(frame)) ?? Data("{}".utf8)
        return (LiveBroadcast.event("frame", data: data), ByteBuffer(bytes: data))
    }

    /// The closing event: the verdict as the exit code gives it, and where the reports are.
    static func end(_ result: RunResult, reports: String) -> ByteBuffer {
        let verdict =
            result.info.abortedBy != nil ? "failed" : result.info.aborted ? "aborted" : result.inconclusive ? "inconclusive" : result.passed ? "passed" : "failed"
        let code = ExitStatus.of(result)
        let end = End(
            verdict: verdict, exitCode: Int(code), reason: result.info.abortReason,
            failed: result.thresholds.filter { !$0.passed }.map { "\($0.metric): \($0.expression)" },
            delivery: result.delivery, reports: fileURL(reports)
        )
        return LiveBroadcast.event("end", data: (try? JSONEncoder().encode(end)) ?? Data("{}".utf8))
    }

    struct Hello: Codable {
        struct Rule: Codable {
            var metric: String
            var expression: String
            var origin: String?
        }

        var runID: String
        var scenario: String
        var devices: Int
        var deadlineSeconds: Double
        var windowSeconds: Double
        var rules: [Rule]
        /// A capacity search's: what it varies and each step's warm-up and window.
        var capacity: CapacityHello?
        /// A sharded run's shard count.
        var shards: Int?
    }

    struct CapacityHello: Codable {
        var vary: String
        var unit: String
        var warmupSeconds: Double
        var windowSeconds: Double
    }

    struct StepDone: Codable {
        var step: CapacityStep
        var lastPass: Double?
        var firstFail: Double?
    }

    struct End: Codable {
        var verdict: String
        var exitCode: Int
        var reason: String?
        var failed: [String]
        var delivery: DeliveryLedger.Counts?
        var reports: String
        /// A capacity search's: the capacity found and its summary.
        var capacity: Double? = nil
        var summary: String? = nil
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: Character) -> Substring {
        var text = self[...]
        while text.last == suffix { text = text.dropLast() }
        return text
    }
}
