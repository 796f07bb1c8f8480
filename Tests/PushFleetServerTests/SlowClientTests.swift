import Foundation
import Logging
import Synchronization
import PushFleetBackend
import PushFleetEmbedded
import PushFleetMockPush
@testable import PushFleetServerSupport
import PushFleetTestSupport
import Testing

/// Slow, oversized and chatty clients against the real servers, on every port and protocol:
/// the backend, the push service's HTTP/1.1 and h2c ports, and its TLS port with HTTP/2.
@Suite("Slow and oversized clients")
struct SlowClientTests {
    static let bodyTimeout = Duration.seconds(1)

    static func limits(maxConnections: Int? = nil) -> ServerLimits {
        ServerLimits(
            maxConnections: maxConnections, idleTimeout: .seconds(20), headerTimeout: .seconds(20), bodyTimeout: bodyTimeout,
            minBodyRate: 1024, maxBodySize: 64 * 1024, pingBurst: 5, pingInterval: .seconds(1)
        )
    }

    /// ``limits(maxConnections:)`` with the header and idle timeouts far past any wait here: what
    /// a test sees within its wait is not theirs, however long a loaded machine takes.
    static func quietLimits() -> ServerLimits {
        var limits = limits()
        limits.idleTimeout = .seconds(600)
        limits.headerTimeout = .seconds(600)
        return limits
    }

    static func configuration(maxConnections: Int? = nil) -> EmbeddedSystem.Configuration {
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.server = limits(maxConnections: maxConnections)
        configuration.pushServer.limits = limits(maxConnections: maxConnections)
        configuration.pushServer.http2Listen = .init(host: "127.0.0.1", port: 0)
        configuration.pushServer.http2Limits = limits(maxConnections: maxConnections)
        return configuration
    }

    static func port(_ base: String) -> Int { Int(base.split(separator: ":").last!)! }

    /// A head, then a byte every 250 ms for 10 s: never a pause of a body timeout. The push
    /// service's token endpoint reads the body before it answers; the backend has no such
    /// route, and answers 404 at once (then the unread body still holds the connection).
    static func trickle(_ path: String, bytes: Int = 40) -> [(delay: Duration, bytes: [UInt8])] {
        let head = "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 50000\r\n\r\n"
        return [(.zero, Array(head.utf8))] + (0..<bytes).map { _ in (Duration.milliseconds(250), [UInt8(ascii: "a")]) }
    }

    @Test("a trickled HTTP/1.1 body is refused one body timeout after its head, and a full server still answers others")
    func trickledBodies() async throws {
        try await TestSystem.run(Self.configuration(maxConnections: 6)) { (system: TestSystem) async throws in
            for base in [system.backend, system.pushService] {
                let port = Self.port(base)
                // 30 s of trickle, so that a starved machine's late body timeout is still told
                // from the trickle's end (a request in progress is never idle).
                let trickle = Self.trickle(base == system.pushService ? "/token" : "/admin/faults", bytes: 120)
                let outcomes = try await withThrowingTaskGroup(of: RawStream.Outcome?.self) { group -> [RawStream.Outcome] in
                    for _ in 0..<6 {
                        group.addTask { try await RawStream.run(port: port, trickle, wait: .seconds(40)) }
                    }
                    // Every slot is held by a trickle now: a plain request must still be answered.
                    group.addTask {
                        try await Task.sleep(for: .milliseconds(500))
                        let health = try await RawStream.run(
                            port: port, [(.zero, Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))], wait: .seconds(30)
                        )
                        #expect(health.text.hasPrefix("HTTP/1.1 200"), "\(base) /health beside 6 trickles: \(health.text.prefix(40))")
                        // Before the trickles end and free their slots.
                        #expect((health.firstByteAfter ?? 99) < 25, "\(base) /health answered after \(String(describing: health.firstByteAfter)) s")
                        return nil
                    }
                    return try await group.reduce(into: []) { if let outcome = $1 { $0.append(outcome) } }
                }
                for outcome in outcomes {
                    // 1 s for the body at 1 KiB/s after it (a few bytes buy nothing); closed long
                    // before the 30 s trickle ends, however loaded the machine.
                    #expect((outcome.closedAfter ?? 99) < 25, "\(base) trickle held for \(String(describing: outcome.closedAfter)) s")
                    // Its route may have answered before reading the body; else 408, or 503 when closed for room.
                    let answers = base == system.pushService ? ["HTTP/1.1 408", "HTTP/1.1 503"] : ["HTTP/1.1 404", "HTTP/1.1 408", "HTTP/1.1 503"]
                    #expect(answers.contains { outcome.text.hasPrefix($0) }, "\(base) trickle: \(outcome.text.prefix(40))")
                }
            }
        }
    }

    @Test("a full server closes the connection stalled longest to answer a newcomer, before any timeout would")
    func roomForNewcomers() async throws {
        // Timeouts far beyond the test: only the cap's eviction can make room.
        var configuration = EmbeddedSystem.Configuration()
        let limits = ServerLimits(maxConnections: 4, idleTimeout: .seconds(60), headerTimeout: .seconds(60), bodyTimeout: .seconds(60))
        configuration.backend.server = limits
        configuration.pushServer.limits = limits
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            for base in [system.backend, system.pushService] {
                let port = Self.port(base)
                let trickle = Self.trickle(base == system.pushService ? "/token" : "/admin/faults")
                let outcomes = try await withThrowingTaskGroup(of: RawStream.Outcome?.self) { group -> [RawStream.Outcome] in
                    for _ in 0..<4 {
                        // The timeouts are 60 s: a close within the wait is the cap's eviction.
                        group.addTask { try await RawStream.run(port: port, Array(trickle.prefix(20)), wait: .seconds(20)) }
                    }
                    group.addTask {
                        try await Task.sleep(for: .milliseconds(300))
                        let health = try await RawStream.run(
                            port: port, [(.zero, Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))], wait: .seconds(20)
                        )
                        #expect(health.text.hasPrefix("HTTP/1.1 200"), "\(base) /health beside 4 trickles: \(health.text.prefix(40))")
                        // Only an eviction could have let it in before the 60 s timeouts.
                        #expect((health.firstByteAfter ?? 99) < 20, "\(base) /health answered after \(String(describing: health.firstByteAfter)) s")
                        return nil
                    }
                    return try await group.reduce(into: []) { if let outcome = $1 { $0.append(outcome) } }
                }
                let evicted = outcomes.filter { $0.closedAfter != nil }
                #expect(!evicted.isEmpty, "\(base): no trickle was closed for room")
                // Closed for room: 503 unless the route had answered already (the backend's 404).
                for outcome in evicted {
                    #expect(["HTTP/1.1 503", "HTTP/1.1 404"].contains { outcome.text.hasPrefix($0) }, "\(base): \(outcome.text.prefix(40))")
                }
            }
        }
    }

    @Test("a stream trickling DATA is answered 408 and ended, over h2c and over TLS")
    func trickledHTTP2() async throws {
        let post = HTTP2Wire.headers(stream: 1, path: "/token", extra: [("content-length", "50000")], endStream: false)
        let parts: [(delay: Duration, bytes: [UInt8])] =
            [(.zero, HTTP2Wire.preface + post)] + (0..<40).map { _ in (.milliseconds(250), HTTP2Wire.data(stream: 1, [0x20])) }
        // Read until the stream's answer ends it. The header and idle timeouts are far past the
        // wait, so a 408 within it is the body guard's; the wait bounds only a hang (a loaded
        // machine has taken 19 s to answer this stream).
        let answered: @Sendable ([UInt8]) -> Bool = { bytes in
            HTTP2Wire.frames(bytes).contains { $0.type == HTTP2Wire.headersType && $0.stream == 1 && $0.flags & 0x1 != 0 }
        }
        let limits = Self.quietLimits()
        var configuration = Self.configuration()
        configuration.pushServer.http2Limits = limits
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let outcome = try await RawStream.run(port: Self.port(system.pushServiceHTTP2!), parts, wait: .seconds(300), until: answered)
            Self.expectStreamEnded(outcome, status: 408, within: 300, "h2c")
        }
        try await TLSTestSystem.run(limits: limits) { (tls: TLSTestSystem) async throws in
            let client = RawStream.TLS(configuration: try tls.clientTLS(), serverName: "api.push.apple.com", alpn: ["h2"])
            let outcome = try await RawStream.run(port: tls.port, tls: client, parts, wait: .seconds(300), until: answered)
            Self.expectStreamEnded(outcome, status: 408, within: 300, "TLS h2")
        }
    }

    /// Stream 1's answer has ended (a HEADERS or DATA frame with END_STREAM).
    static let streamOneEnded: @Sendable ([UInt8]) -> Bool = { bytes in
        HTTP2Wire.frames(bytes).contains { $0.stream == 1 && $0.type <= 1 && $0.flags & 0x1 != 0 }
    }

    static func expectStreamEnded(_ outcome: RawStream.Outcome, status: Int, within seconds: Double, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let frames = HTTP2Wire.frames(outcome.bytes)
        let answer = frames.first { $0.type == HTTP2Wire.headersType && $0.stream == 1 }
        #expect(answer.map { HTTP2Wire.hasStatus($0.payload, status) } == true, "\(what): frames \(frames)", sourceLocation: sourceLocation)
        #expect(answer.map { $0.flags & 0x1 != 0 } == true, "\(what): the answer does not end the stream", sourceLocation: sourceLocation)
        let at = answer.flatMap { outcome.seconds(untilByte: $0.offset) } ?? 99
        #expect(at < seconds, "\(what): answered after \(at) s", sourceLocation: sourceLocation)
    }

    @Test("a first chunk or a length past its route's cap (1 MiB on the backend's 64 KiB send route) is answered 413 as it is declared, not at the body timeout")
    func routeCap() async throws {
        var configuration = EmbeddedSystem.Configuration()
        // A body timeout no test waits out: a 413 before it is the route cap's doing.
        configuration.backend.server = ServerLimits(bodyTimeout: .seconds(600))
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let auth = "Authorization: Basic \(Data("alice:alice".utf8).base64EncodedString())\r\n"
            let head = "POST /api/notifications/secure?to_tag=bob HTTP/1.1\r\nHost: x\r\n\(auth)"
            for request in [head + "Transfer-Encoding: chunked\r\n\r\n100000\r\nab", head + "Content-Length: 1048576\r\n\r\nab"] {
                let outcome = try await RawStream.run(port: Self.port(system.backend), [(.zero, Array(request.utf8))], wait: .seconds(60))
                #expect(outcome.text.hasPrefix("HTTP/1.1 413"), "\(outcome.text.prefix(60))")
            }
            // Within the cap the route answers as before.
            let sent = try await system.sendSecure(from: "alice", to: "bob", payload: "hi")
            #expect(sent.status == 200)
        }
    }

    @Test("a declared body over the cap is answered 413 at once, before it is read, on every port")
    func oversizedBodies() async throws {
        let requests: [(String, String)] = [
            ("Content-Length 2^62", "PUT /admin/faults HTTP/1.1\r\nHost: x\r\nContent-Length: 4611686018427387904\r\n\r\nab"),
            ("a first chunk of 2^63", "PUT /admin/faults HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n8000000000000000\r\nab"),
            ("a first chunk of 1 MiB", "PUT /admin/faults HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\nab"),
            ("a second chunk of 1 MiB", "PUT /admin/faults HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n100000;x=y\r\nab"),
        ]
        try await TestSystem.run(Self.configuration()) { (system: TestSystem) async throws in
            for base in [system.backend, system.pushService] {
                for (name, request) in requests {
                    // A 413, not the body timeout's 408, says it was refused before the body; the
                    // close is only bounded against a hang.
                    let outcome = try await RawStream.run(port: Self.port(base), [(.zero, Array(request.utf8))], wait: .seconds(30))
                    #expect(outcome.text.hasPrefix("HTTP/1.1 413"), "\(base) \(name): \(outcome.text.prefix(40))")
                    #expect(outcome.closedAfter != nil, "\(base) \(name): still open after 30 s")
                }
                // Bodies within the cap, chunked or not, still pass to their routes.
                let fine = try await RawStream.run(
                    port: Self.port(base),
                    [(.zero, Array("GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc".utf8))],
                    wait: .seconds(5)
                )
                #expect(fine.text.components(separatedBy: "HTTP/1.1 200").count == 3, "\(base) bodies within the cap: \(fine.text)")
            }
            let h2 = HTTP2Wire.preface + HTTP2Wire.headers(stream: 1, path: "/3/device/abc", extra: [("content-length", "4611686018427387904")], endStream: false)
            // A 413, not the 1 s body timeout's 408, says it was refused at its head; the time is
            // bounded only against a hang.
            let outcome = try await RawStream.run(port: Self.port(system.pushServiceHTTP2!), [(.zero, h2)], wait: .seconds(30), until: Self.streamOneEnded)
            Self.expectStreamEnded(outcome, status: 413, within: 30, "h2c")
        }
        // A close within the waits follows the 413, not a timeout.
        try await TLSTestSystem.run(limits: Self.quietLimits()) { (tls: TLSTestSystem) async throws in
            let h2 = HTTP2Wire.preface + HTTP2Wire.headers(stream: 1, path: "/3/device/abc", extra: [("content-length", "4611686018427387904")], endStream: false)
            let h2Client = RawStream.TLS(configuration: try tls.clientTLS(), serverName: "api.push.apple.com", alpn: ["h2"])
            Self.expectStreamEnded(
                try await RawStream.run(port: tls.port, tls: h2Client, [(.zero, h2)], wait: .seconds(30), until: Self.streamOneEnded), status: 413,
                within: 30, "TLS h2"
            )
            let h1Client = RawStream.TLS(configuration: try tls.clientTLS(), serverName: "api.push.apple.com", alpn: ["http/1.1"])
            for (name, request) in requests {
                let outcome = try await RawStream.run(port: tls.port, tls: h1Client, [(.zero, Array(request.utf8))], wait: .seconds(120))
                #expect(outcome.text.hasPrefix("HTTP/1.1 413"), "TLS \(name): \(outcome.text.prefix(40))")
                #expect(outcome.closedAfter != nil, "TLS \(name): still open after 120 s")
            }
        }
    }

    @Test("PINGs for liveness are answered and the connection kept; a flood gets GOAWAY ENHANCE_YOUR_CALM, then a close")
    func pings() async throws {
        // Five PINGs 300 ms apart, far more often than once in 30 s, within the burst.
        let liveness: [(delay: Duration, bytes: [UInt8])] =
            [(.zero, HTTP2Wire.preface)] + (1...5).map { (.milliseconds(300), HTTP2Wire.ping(UInt8($0))) }
        let flood: [(delay: Duration, bytes: [UInt8])] = [(.zero, HTTP2Wire.preface + (1...40).flatMap { HTTP2Wire.ping(UInt8($0)) })]
        // Each read ends at its outcome (the fifth ack, or the close); the waits only bound a
        // hang, as a loaded machine may take seconds to answer.
        let acked: @Sendable ([UInt8]) -> Bool = { bytes in HTTP2Wire.frames(bytes).count { $0.type == HTTP2Wire.pingType && $0.flags & 0x1 != 0 } >= 5 }
        @Sendable func check(
            _ run: ([(delay: Duration, bytes: [UInt8])], Duration, (@Sendable ([UInt8]) -> Bool)?) async throws -> RawStream.Outcome, _ what: String
        ) async throws {
            let kept = try await run(liveness, .seconds(60), acked)
            let keptFrames = HTTP2Wire.frames(kept.bytes)
            #expect(keptFrames.count { $0.type == HTTP2Wire.pingType && $0.flags & 0x1 != 0 } == 5, "\(what): acks \(keptFrames.map(\.type))")
            #expect(!keptFrames.contains { $0.type == HTTP2Wire.goAwayType } && kept.closedAfter == nil, "\(what): liveness pings closed the connection after \(String(describing: kept.closedAfter)) s: \(keptFrames)")
            let flooded = try await run(flood, .seconds(60), nil)
            let goAway = HTTP2Wire.frames(flooded.bytes).first { $0.type == HTTP2Wire.goAwayType }
            #expect(goAway.map { Array($0.payload[4..<8]) } == [0, 0, 0, 11], "\(what): GOAWAY \(String(describing: goAway))")
            #expect(goAway.map { String(decoding: $0.payload.dropFirst(8), as: UTF8.self) } == "too_many_pings")
            #expect(flooded.closedAfter != nil, "\(what): a flood left the connection open")
        }
        try await TestSystem.run(Self.configuration()) { (system: TestSystem) async throws in
            let port = Self.port(system.pushServiceHTTP2!)
            try await check({ try await RawStream.run(port: port, $0, wait: $1, until: $2) }, "h2c")
        }
        try await TLSTestSystem.run(limits: Self.limits()) { (tls: TLSTestSystem) async throws in
            let client = RawStream.TLS(configuration: try tls.clientTLS(), serverName: "api.push.apple.com", alpn: ["h2"])
            try await check({ try await RawStream.run(port: tls.port, tls: client, $0, wait: $1, until: $2) }, "TLS h2")
        }
    }

    @Test("servers stop at once with idle and kept-alive connections on every port, and log nothing at error level")
    func cleanStop() async throws {
        let records = LogCapture()
        let logger = records.logger
        // Connections that outlive a stop would hold it for these timeouts: far past the bound below.
        let limits = Self.quietLimits()
        var configuration = Self.configuration()
        configuration.backend.server = limits
        configuration.pushServer.limits = limits
        configuration.pushServer.http2Limits = limits
        configuration.pushServer.tls = .init(
            listen: .init(host: "127.0.0.1", port: 0), identity: try TLSIdentity.generate(names: ["api.push.apple.com"]), limits: limits
        )
        // The servers get longer than any loaded machine needs to stop gracefully, so a cancel
        // (which logs at error level) means they waited on a connection.
        let shutdownWithin = Duration.seconds(120)
        let (held, stopping) = try await EmbeddedSystem.withRunning(configuration, logger: logger, shutdownWithin: shutdownWithin) { system, endpoints in
            let tls = try await system.pushServer!.boundTLS.value().port
            let ports = [Self.port(endpoints.backend), Self.port(endpoints.pushService), Self.port(endpoints.pushServiceHTTP2!), tls]
            // A connection that never sends a request on each port, as a client pool's spare.
            let names = ["backend", "push HTTP/1.1", "push h2c", "push TLS"]
            var held = try zip(names, ports).map { (name: "idle on \($0) (\($1))", fd: try RawSocket.openIdle(port: $1)) }
            // One kept alive after an answer on each HTTP/1.1 port.
            for port in ports.prefix(2) {
                let fd = try RawSocket.openIdle(port: port)
                let request = Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
                _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                var buffer = [UInt8](repeating: 0, count: 1024)
                #expect(read(fd, &buffer, buffer.count) > 0)
                held.append((name: "kept alive on \(port)", fd: fd))
            }
            try await Task.sleep(for: .milliseconds(200))
            return (held, ContinuousClock.now)
        }
        let stop = ContinuousClock.now - stopping
        // Under the 300 s timeouts and the cancel, with room for a loaded machine: stopping did not
        // wait on the held connections.
        #expect(stop < .seconds(60), "the servers took \(stop) to stop")
        #expect(records.errors.isEmpty, "\(records.errors)")
        for (name, fd) in held {
            // A bound that only catches a connection left open: a loaded machine closes them late.
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 1024)
            var count = read(fd, &buffer, buffer.count)
            while count > 0 { count = read(fd, &buffer, buffer.count) }
            // Reset: still in the backlog when the listener closed.
            let error = errno
            #expect(count == 0 || error == ECONNRESET, "\(name) is still open after the stop (errno \(error))")
            RawSocket.closeIdle(fd)
        }
    }

    @Test("new limits out of range are refused")
    func limitRanges() {
        #expect(ServerLimits(minBodyRate: 0).problems() == ["min body rate must be between 1 and 1073741824 bytes a second, got 0"])
        #expect(ServerLimits(maxBodySize: 10).problems() == ["max body size must be between 1 KiB and 1 TiB, got 10"])
        #expect(ServerLimits(pingBurst: 0).problems() == ["ping burst must be between 1 and 1000, got 0"])
        #expect(ServerLimits(pingInterval: .zero).problems() == ["ping interval must be between 1ms and 24h"])
        #expect(ServerLimits(evictionGrace: .seconds(-1)).problems() == ["eviction grace must be between 0 and 24h"])
    }
}
