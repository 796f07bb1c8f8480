import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOCore
import PushFleetCore
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

    /// The opening event: the run, its rules and the window the page's judgements cover.
    static func hello(_ scenario: Scenario, plan: FleetPlan, window: Duration) -> ByteBuffer {
        let own = scenario.thresholds.count
        let hello = Hello(
            runID: plan.runID, scenario: scenario.name, devices: plan.devices.count, deadlineSeconds: scenario.deadline.seconds,
            windowSeconds: window.seconds,
            rules: scenario.effectiveThresholds.enumerated().map { .init(metric: $0.element.metric, expression: $0.element.expression, origin: $0.offset < own ? nil : "default") }
        )
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
        let code =
            result.info.abortedBy != nil ? ExitStatus.thresholdFailed : result.info.aborted ? ExitStatus.failure
            : result.inconclusive ? ExitStatus.inconclusive : result.passed ? 0 : ExitStatus.thresholdFailed
        let end = End(
            verdict: verdict, exitCode: Int(code), reason: result.info.abortReason,
            failed: result.thresholds.filter { !$0.passed }.map { "\($0.metric): \($0.expression)" },
            delivery: result.delivery, reports: String(URL(fileURLWithPath: reports).standardizedFileURL.absoluteString.trimmingSuffix("/"))
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
    }

    struct End: Codable {
        var verdict: String
        var exitCode: Int
        var reason: String?
        var failed: [String]
        var delivery: DeliveryLedger.Counts
        var reports: String
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: Character) -> Substring {
        var text = self[...]
        while text.last == suffix { text = text.dropLast() }
        return text
    }
}
