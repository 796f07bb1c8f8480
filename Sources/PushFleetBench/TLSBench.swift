public import ArgumentParser
import Foundation
import PushFleetEngine
import JWTKit
import Logging
import PushFleetCore
import PushFleetLauncher
import PushFleetMockPush
import PushFleetServerSupport
import ServiceLifecycle

/// APNs throughput of the mock push service over TLS beside cleartext, in one invocation:
/// h2load (Debian's nghttp2-client) posts the same provider request over HTTP/2 cleartext,
/// HTTP/2 over TLS, and HTTP/1.1 both ways, to a push service in this process.
public struct TLSBench: AsyncParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "tls",
        abstract: "APNs requests/s over TLS (HTTP/2, HTTP/1.1) beside cleartext, with h2load as the client.",
        discussion: """
            Each row is one h2load run of --requests requests on --connections connections (HTTP/2: \
            --streams concurrent streams each) against the embedded push service, with a valid provider \
            token; pushes go to an offline device with apns-expiration: 0, so the rows measure the protocol, \
            TLS and request checks, not delivery. h2load comes from Debian's nghttp2-client, as \
            scripts/install-bench-tools installs it.
            """
    )

    @Option(help: "Requests per run.") var requests = 100_000
    @Option(help: "Concurrent connections.") var connections = 16
    @Option(help: "Concurrent streams per HTTP/2 connection.") var streams = 16
    @Option(help: "Longest a run may take; it is stopped then.") var timeLimit = "120s"

    public init() {}

    public func validate() throws {
        guard (1...10_000_000).contains(requests) else { throw ValidationError("--requests must be 1 to 10000000") }
        guard (1...1_000).contains(connections) else { throw ValidationError("--connections must be 1 to 1000") }
        guard (1...1_000).contains(streams) else { throw ValidationError("--streams must be 1 to 1000") }
        let limit = try Bench.duration(timeLimit, flag: "--time-limit")
        guard limit >= .seconds(1) && limit <= .seconds(3600) else { throw ValidationError("--time-limit must be 1s to 1h") }
    }

    struct Row {
        var label: String
        var done: Int
        var succeeded: Int
        var seconds: Double
        var serverCPU: Double
        var clientCPU: Double
    }

    public func run() async throws {
        guard let h2load = await ReferenceTool.h2load.find() else { throw BenchFailure("h2load is needed: run scripts/install-bench-tools") }
        var logger = Logger(label: "pushfleet.bench.tls")
        logger.logLevel = .warning
        let identity = try TLSIdentity.generate(names: ["api.push.apple.com"])
        let loopback = ListenAddress(host: "127.0.0.1", port: 0)
        let server = MockPushServer(
            service: PushService(),
            configuration: .init(
                listen: loopback, http2Listen: loopback, limits: ServerLimits().resolved(share: 0.3),
                http2Limits: ServerLimits().resolved(share: 0.3), tls: .init(listen: loopback, identity: identity, limits: ServerLimits().resolved(share: 0.3))
            )
        )
        let group = ServiceGroup(configuration: .init(services: server.makeServices(logger: logger).map { .init(service: $0) }, logger: logger))
        let limit = try Bench.duration(timeLimit, flag: "--time-limit")
        let rows = try await withThrowingTaskGroup(of: [Row]?.self) { tasks in
            tasks.addTask {
                try await group.run()
                return nil
            }
            tasks.addTask {
                let http1 = try await server.bound.value().port
                let h2c = try await server.boundHTTP2.value().port
                let tls = try await server.boundTLS.value().port
                let authorization = try await Self.providerToken()
                let path = "/3/device/" + String(repeating: "ab", count: 32)
                var rows: [Row] = []
                for (label, url, http1Only) in [
                    ("HTTP/2 cleartext (h2c)", "http://127.0.0.1:\(h2c)\(path)", false),
                    ("HTTP/2 over TLS (ALPN h2)", "https://127.0.0.1:\(tls)\(path)", false),
                    ("HTTP/1.1 cleartext", "http://127.0.0.1:\(http1)\(path)", true),
                    ("HTTP/1.1 over TLS", "https://127.0.0.1:\(tls)\(path)", true),
                ] {
                    rows.append(try await measure(h2load, label: label, url: url, http1Only: http1Only, authorization: authorization, limit: limit))
                }
                return rows
            }
            guard let rows = try await tasks.next() ?? nil else {
                tasks.cancelAll()
                throw BenchFailure("the push service stopped")
            }
            // Let the servers stop on their own rather than cancel them mid-shutdown.
            await group.triggerGracefulShutdown()
            _ = try? await tasks.next()
            return rows
        }
        var lines = [
            "", "bench tls: POST /3/device/… (APNs, valid provider token) × \(requests), \(connections) connections, \(streams) streams each (HTTP/2)",
            "transport                       done  2xx       req/s  server CPU-s  req/server-CPU-s  h2load CPU-s",
        ]
        for row in rows {
            lines.append(
                row.label.padding(toLength: 28, withPad: " ", startingAt: 0)
                    + String(
                        format: " %7d  %7d  %9.0f  %12.2f  %16.0f  %12.2f", row.done, row.succeeded, Double(row.done) / max(row.seconds, 0.001),
                        row.serverCPU, Double(row.done) / max(row.serverCPU, 0.001), row.clientCPU
                    )
            )
        }
        if let clear = rows.first, let tls = rows.dropFirst().first {
            let ratio = (Double(tls.done) / max(tls.seconds, 0.001)) / max(Double(clear.done) / max(clear.seconds, 0.001), 0.001)
            lines.append(String(format: "HTTP/2 over TLS runs at %.2f × the cleartext rate", ratio))
        }
        FileHandleOutput.standardOutput(lines.joined(separator: "\n"))
        if let bad = rows.first(where: { $0.succeeded != requests }) {
            throw BenchFailure("\(bad.label): \(bad.succeeded) of \(requests) requests answered 2xx")
        }
    }

    /// One h2load run, stopped if it outlives `limit`.
    private func measure(
        _ h2load: String, label: String, url: String, http1Only: Bool, authorization: String, limit: Duration
    ) async throws -> Row {
        let bodyFile = FileManager.default.temporaryDirectory.appendingPathComponent("pf-bench-tls-\(getpid()).json").path
        try #"{"aps":{"alert":"bench"}}"#.write(toFile: bodyFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: bodyFile) }
        var arguments = [
            "-n", "\(requests)", "-c", "\(connections)", "-m", "\(http1Only ? 1 : streams)", "-t", "1",
            "-H", "authorization: \(authorization)", "-H", "apns-topic: com.pushfleet.bench", "-H", "apns-expiration: 0",
            "-H", "content-type: application/json", "-d", bodyFile,
        ]
        if http1Only { arguments.append("--h1") }
        arguments.append(url)
        let serverBefore = CPUTime.own()
        let clientBefore = CPUTime.children()
        let started = Date()
        let output = try await H2Load.run(h2load, arguments, limit: limit)
        let seconds = Date().timeIntervalSince(started)
        guard let summary = H2Load.Summary(output) else { throw BenchFailure("h2load gave no result for \(label): \(output.suffix(300))") }
        return Row(
            label: label, done: summary.done, succeeded: summary.succeeded, seconds: summary.seconds ?? seconds,
            serverCPU: CPUTime.own() - serverBefore, clientCPU: CPUTime.children() - clientBefore
        )
    }

    /// A provider token as a backend signs it (ES256, a key made now).
    private static func providerToken() async throws -> String {
        struct Claims: JWTPayload {
            var iss: String
            var iat: Int64
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        var header = JWTHeader()
        header.kid = "BENCHKEY01"
        let keys = await JWTKeyCollection().add(ecdsa: ES256PrivateKey())
        return "bearer " + (try await keys.sign(Claims(iss: "BENCHTEAM1", iat: Int64(Date().timeIntervalSince1970)), header: header))
    }
}
