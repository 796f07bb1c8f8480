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
    static func trickle(_ path: String) -> [(delay: Duration, bytes: [UInt8])] {
        let head = "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 50000\r\n\r\n"
        return [(.zero, Array(head.utf8))] + (0..<40).map { _ in (Duration.milliseconds(250), [UInt8(ascii: "a")]) }
    }

    @Test("a trickled HTTP/1.1 body is refused one body timeout after its head, and a full server still answers others")
    func trickledBodies() async throws {
        try await TestSystem.run(Self.configuration(maxConnections: 6)) { (system: TestSystem) async throws in
            for base in [system.backend, system.pushService] {
                let port = Self.port(base)
                let trickle = Self.trickle(base == system.pushService ? "/token" : "/admin/faults")
                let outcomes = try await withThrowingTaskGroup(of: RawStream.Outcome?.self) { group -> [RawStream.Outcome] in
                    for _ in 0..<6 {
                        group.addTask { try await RawStream.run(port: port, trickle, wait: .seconds(10)) }
                    }
                    // Every slot is held by a trickle now: a plain request must still be answered.
                    group.addTask {
                        try await Task.sleep(for: .milliseconds(500))
                        let health = try await RawStream.run(
                            port: port, [(.zero, Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))], wait: .seconds(10)
                        )
                        #expect(health.text.hasPrefix("HTTP/1.1 200"), "\(base) /health beside 6 trickles: \(health.text.prefix(40))")
                        #expect((health.firstByteAfter ?? 99) < 2, "\(base) /health answered after \(String(describing: health.firstByteAfter)) s")
                        return nil
                    }
                    return try await group.reduce(into: []) { if let outcome = $1 { $0.append(outcome) } }
                }
                for outcome in outcomes {
                    // 1 s for the body at 1 KiB/s after it (a few bytes buy nothing), with room for a loaded machine.
                    #expect((outcome.closedAfter ?? 99) < 4, "\(base) trickle held for \(String(describing: outcome.closedAfter)) s")
                    // Its route may have answered before reading the body; else 408, or 503 when closed for room.
                    let answers = base == system.pushService ? ["HTTP/1.1 408", "HTTP/1.1 503"] : ["HTTP/1.1 404", "HTTP/1.1 503"]
                    #expect(answers.contains { outcome.text.hasPrefix($0) }, "\(base) trickle: \(outcome.text.prefix(40))")
                }
            }
        }
    }

    @Test("a stream trickling DATA is answered 408 and ended, over h2c and over TLS")
    func trickledHTTP2() async throws {
        let post = HTTP2Wire.headers(stream: 1, path: "/token", extra: [("content-length", "50000")], endStream: false)
        let parts: [(delay: Duration, bytes: [UInt8])] =
            [(.zero, HTTP2Wire.preface + post)] + (0..<40).map { _ in (.milliseconds(250), HTTP2Wire.data(stream: 1, [0x20])) }
        try await TestSystem.run(Self.configuration()) { (system: TestSystem) async throws in
            let outcome = try await RawStream.run(port: Self.port(system.pushServiceHTTP2!), parts, wait: .seconds(6))
            Self.expectStreamEnded(outcome, status: 408, within: 4, "h2c")
        }
        try await TLSTestSystem.run(limits: Self.limits()) { (tls: TLSTestSystem) async throws in
            let client = RawStream.TLS(configuration: try tls.clientTLS(), serverName: "api.push.apple.com", alpn: ["h2"])
            let outcome = try await RawStream.run(port: tls.port, tls: client, parts, wait: .seconds(6))
            Self.expectStreamEnded(outcome, status: 408, within: 4, "TLS h2")
        }
    }

    static func expectStreamEnded(_ outcome: RawStream.Outcome, status: Int, within seconds: Double, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let frames = HTTP2Wire.frames(outcome.bytes)
        let answer = frames.first { $0.type == HTTP2Wire.headersType && $0.stream == 1 }
        #expect(answer.map { HTTP2Wire.hasStatus($0.payload, status) } == true, "\(what): frames \(frames)", sourceLocation: sourceLocation)
        #expect(answer.map { $0.flags & 0x1 != 0 } == true, "\(what): the answer does not end the stream", sourceLocation: sourceLocation)
        let at = answer.flatMap { outcome.seconds(untilByte: $0.offset) } ?? 99
        #expect(at < seconds, "\(what): answered after \(at) s", sourceLocation: sourceLocation)
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
                    let outcome = try await RawStream.run(port: Self.port(base), [(.zero, Array(request.utf8))], wait: .seconds(10))
                    #expect(outcome.text.hasPrefix("HTTP/1.1 413"), "\(base) \(name): \(outcome.text.prefix(40))")
                    #expect((outcome.closedAfter ?? 99) < 1, "\(base) \(name): closed after \(String(describing: outcome.closedAfter)) s")
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
            let outcome = try await RawStream.run(port: Self.port(system.pushServiceHTTP2!), [(.zero, h2)], wait: .seconds(3))
            Self.expectStreamEnded(outcome, status: 413, within: 1, "h2c")
        }
        try await TLSTestSystem.run(limits: Self.limits()) { (tls: TLSTestSystem) async throws in
            let h2 = HTTP2Wire.preface + HTTP2Wire.headers(stream: 1, path: "/3/device/abc", extra: [("content-length", "4611686018427387904")], endStream: false)
            let h2Client = RawStream.TLS(configuration: try tls.clientTLS(), serverName: "api.push.apple.com", alpn: ["h2"])
            Self.expectStreamEnded(try await RawStream.run(port: tls.port, tls: h2Client, [(.zero, h2)], wait: .seconds(3)), status: 413, within: 1, "TLS h2")
            let h1Client = RawStream.TLS(configuration: try tls.clientTLS(), serverName: "api.push.apple.com", alpn: ["http/1.1"])
            for (name, request) in requests {
                let outcome = try await RawStream.run(port: tls.port, tls: h1Client, [(.zero, Array(request.utf8))], wait: .seconds(10))
                #expect(outcome.text.hasPrefix("HTTP/1.1 413"), "TLS \(name): \(outcome.text.prefix(40))")
                #expect((outcome.closedAfter ?? 99) < 1, "TLS \(name): closed after \(String(describing: outcome.closedAfter)) s")
            }
        }
    }

    @Test("PINGs for liveness are answered and the connection kept; a flood gets GOAWAY ENHANCE_YOUR_CALM, then a close")
    func pings() async throws {
        // Five PINGs 300 ms apart, far more often than once in 30 s, within the burst.
        let liveness: [(delay: Duration, bytes: [UInt8])] =
            [(.zero, HTTP2Wire.preface)] + (1...5).map { (.milliseconds(300), HTTP2Wire.ping(UInt8($0))) }
        let flood: [(delay: Duration, bytes: [UInt8])] = [(.zero, HTTP2Wire.preface + (1...40).flatMap { HTTP2Wire.ping(UInt8($0)) })]
        @Sendable func check(_ run: ([(delay: Duration, bytes: [UInt8])]) async throws -> RawStream.Outcome, _ what: String) async throws {
            let kept = try await run(liveness)
            let keptFrames = HTTP2Wire.frames(kept.bytes)
            #expect(keptFrames.count { $0.type == HTTP2Wire.pingType && $0.flags & 0x1 != 0 } == 5, "\(what): acks \(keptFrames.map(\.type))")
            #expect(!keptFrames.contains { $0.type == HTTP2Wire.goAwayType } && kept.closedAfter == nil, "\(what): liveness pings closed the connection after \(String(describing: kept.closedAfter)) s: \(keptFrames)")
            let flooded = try await run(flood)
            let goAway = HTTP2Wire.frames(flooded.bytes).first { $0.type == HTTP2Wire.goAwayType }
            #expect(goAway.map { Array($0.payload[4..<8]) } == [0, 0, 0, 11], "\(what): GOAWAY \(String(describing: goAway))")
            #expect(goAway.map { String(decoding: $0.payload.dropFirst(8), as: UTF8.self) } == "too_many_pings")
            #expect(flooded.closedAfter != nil, "\(what): a flood left the connection open")
        }
        try await TestSystem.run(Self.configuration()) { (system: TestSystem) async throws in
            let port = Self.port(system.pushServiceHTTP2!)
            try await check({ try await RawStream.run(port: port, $0, wait: .seconds(3)) }, "h2c")
        }
        try await TLSTestSystem.run(limits: Self.limits()) { (tls: TLSTestSystem) async throws in
            let client = RawStream.TLS(configuration: try tls.clientTLS(), serverName: "api.push.apple.com", alpn: ["h2"])
            try await check({ try await RawStream.run(port: tls.port, tls: client, $0, wait: .seconds(3)) }, "TLS h2")
        }
    }

    @Test("servers stop at once with idle and kept-alive connections on every port, and log nothing at error level")
    func cleanStop() async throws {
        let records = LogRecords()
        var logger = Logger(label: "pushfleet.stop-test") { _ in RecordingLogHandler(records: records) }
        logger.logLevel = .info
        var configuration = Self.configuration()
        configuration.pushServer.tls = .init(
            listen: .init(host: "127.0.0.1", port: 0), identity: try TLSIdentity.generate(names: ["api.push.apple.com"]), limits: Self.limits()
        )
        let (held, stopping) = try await EmbeddedSystem.withRunning(configuration, logger: logger) { system, endpoints in
            let tls = try await system.pushServer!.boundTLS.value().port
            let ports = [Self.port(endpoints.backend), Self.port(endpoints.pushService), Self.port(endpoints.pushServiceHTTP2!), tls]
            // A connection that never sends a request on each port, as a client pool's spare.
            var held = try ports.map { (name: "idle \($0)", fd: try RawSocket.openIdle(port: $0)) }
            // One kept alive after an answer on each HTTP/1.1 port.
            for port in ports.prefix(2) {
                let fd = try RawSocket.openIdle(port: port)
                let request = Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
                _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                var buffer = [UInt8](repeating: 0, count: 1024)
                #expect(read(fd, &buffer, buffer.count) > 0)
                held.append((name: "kept alive \(port)", fd: fd))
            }
            try await Task.sleep(for: .milliseconds(200))
            return (held, ContinuousClock.now)
        }
        let stop = ContinuousClock.now - stopping
        // withServices waits up to 5 s for a graceful stop, then cancels the servers (which logs).
        #expect(stop < .seconds(2), "the servers took \(stop) to stop")
        #expect(records.errors.isEmpty, "\(records.errors)")
        for (name, fd) in held {
            var timeout = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 1024)
            var count = read(fd, &buffer, buffer.count)
            while count > 0 { count = read(fd, &buffer, buffer.count) }
            #expect(count == 0 || errno == ECONNRESET, "\(name) is still open after the stop")
            RawSocket.closeIdle(fd)
        }
    }

    @Test("new limits out of range are refused")
    func limitRanges() {
        #expect(ServerLimits(minBodyRate: 0).problems() == ["min body rate must be between 1 and 1073741824 bytes a second, got 0"])
        #expect(ServerLimits(maxBodySize: 10).problems() == ["max body size must be between 1 KiB and 1 TiB, got 10"])
        #expect(ServerLimits(pingBurst: 0).problems() == ["ping burst must be between 1 and 1000, got 0"])
        #expect(ServerLimits(pingInterval: .zero).problems() == ["ping interval must be between 1ms and 24h"])
    }
}

/// HTTP/2 frames written and read by hand (RFC 9113 §4), headers as HPACK literals without
/// Huffman coding (RFC 7541 §6.2.2).
enum HTTP2Wire {
    static let headersType: UInt8 = 1
    static let pingType: UInt8 = 6
    static let goAwayType: UInt8 = 7

    /// The client preface and an empty SETTINGS frame.
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + frame(type: 4, flags: 0, stream: 0, [])

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    static func headers(stream: UInt32, path: String, extra: [(String, String)], endStream: Bool) -> [UInt8] {
        let fields = [(":method", "POST"), (":scheme", "https"), (":path", path), (":authority", "api.push.apple.com")] + extra
        var block: [UInt8] = []
        for (name, value) in fields {
            block += [0x00, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        return frame(type: headersType, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, block)
    }

    static func data(stream: UInt32, _ bytes: [UInt8], endStream: Bool = false) -> [UInt8] {
        frame(type: 0, flags: endStream ? 0x1 : 0, stream: stream, bytes)
    }

    static func ping(_ tag: UInt8) -> [UInt8] {
        frame(type: pingType, flags: 0, stream: 0, [0, 0, 0, 0, 0, 0, 0, tag])
    }

    struct Frame: CustomStringConvertible {
        /// Where the frame starts in what the server sent.
        var offset: Int
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]
        var description: String { "type \(type) flags \(flags) stream \(stream) \(payload)" }
    }

    /// The frames in what a server sent, up to a partial one.
    static func frames(_ bytes: [UInt8]) -> [Frame] {
        var frames: [Frame] = []
        var index = 0
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            guard index + 9 + length <= bytes.count else { break }
            let stream = UInt32(bytes[index + 5] & 0x7F) << 24 | UInt32(bytes[index + 6]) << 16 | UInt32(bytes[index + 7]) << 8 | UInt32(bytes[index + 8])
            frames.append(Frame(offset: index, type: bytes[index + 3], flags: bytes[index + 4], stream: stream, payload: Array(bytes[(index + 9)..<(index + 9 + length)])))
            index += 9 + length
        }
        return frames
    }

    /// Whether a header block holds `:status` `status`: as a literal value, plain or Huffman
    /// coded (digits only), after `:status`'s static-table name.
    static func hasStatus(_ block: [UInt8], _ status: Int) -> Bool {
        let digits = Array(String(status).utf8)
        let plain = [UInt8(digits.count)] + digits
        let huffman = Self.huffman(digits)
        let coded = [0x80 | UInt8(huffman.count)] + huffman
        return block.contains(subsequence: plain) || block.contains(subsequence: coded)
    }

    /// RFC 7541 Appendix B for the digits: '0'–'2' five bits, '3'–'9' six.
    static func huffman(_ digits: [UInt8]) -> [UInt8] {
        var bits: [Bool] = []
        for digit in digits {
            let value = Int(digit - 0x30)
            let (code, length) = value < 3 ? (value, 5) : (0x19 + value - 3, 6)
            for shift in stride(from: length - 1, through: 0, by: -1) { bits.append(code >> shift & 1 == 1) }
        }
        while bits.count % 8 != 0 { bits.append(true) }
        return stride(from: 0, to: bits.count, by: 8).map { start in bits[start..<start + 8].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) } }
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard !subsequence.isEmpty, subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains { Array(self[$0..<$0 + subsequence.count]) == subsequence }
    }
}

/// The body, framing, ping and eviction rules without sockets, on integer times.
@Suite("Slow-client state machines")
struct SlowClientStateTests {
    static let second: Int64 = 1_000_000_000

    @Test("a body trickling under the minimum rate is refused one body timeout after its head, whatever its pauses")
    func minimumRate() {
        var state = BodyTimeoutState(bodyTimeout: .seconds(60), minRate: 1024, maxSize: 1 << 20)
        #expect(state.head(now: 0, declaredLength: 100_000) == .arm(at: 60 * Self.second))
        // A byte every 5 s: each moves the pause deadline, none the rate deadline by much.
        for tick in 1...11 { #expect(state.body(now: Int64(tick) * 5 * Self.second, bytes: 1) == TimerAction.none) }
        let due = 60 * Self.second + 11 * Self.second / 1024
        #expect(state.timerFired(now: 60 * Self.second) == .arm(at: due))
        #expect(state.timerFired(now: due) == .reject(status: 408))
        #expect(state.end() == TimerAction.none)

        // A large body at a good rate is never cut: each KiB buys a second.
        var fast = BodyTimeoutState(bodyTimeout: .seconds(1), minRate: 1024, maxSize: 1 << 30)
        _ = fast.head(now: 0)
        for tick in 1...100 { _ = fast.body(now: Int64(tick) * Self.second / 2, bytes: 2048) }
        #expect(fast.timerFired(now: 50 * Self.second) == .arm(at: 50 * Self.second + Self.second))
        #expect(fast.end() == .disarm)

        // Without a rate, pauses alone count, as before.
        var pauses = BodyTimeoutState(bodyTimeout: .seconds(1))
        #expect(pauses.head(now: 0) == .arm(at: Self.second))
        #expect(pauses.body(now: 600_000_000) == TimerAction.none)
        #expect(pauses.timerFired(now: Self.second) == .arm(at: 1_600_000_000))
        #expect(pauses.timerFired(now: 1_600_000_000) == .reject(status: 408))
    }

    @Test("a body over the cap is refused at its head when declared, else when it grows past it")
    func sizeCap() {
        var declared = BodyTimeoutState(bodyTimeout: .seconds(1), minRate: 1, maxSize: 1000)
        #expect(declared.head(now: 0, declaredLength: 1 << 62) == .reject(status: 413))
        #expect(declared.body(now: 1, bytes: 10) == TimerAction.none)
        #expect(declared.head(now: 0, declaredLength: .max) == .reject(status: 413))
        var grown = BodyTimeoutState(bodyTimeout: .seconds(1), minRate: 1, maxSize: 1000)
        #expect(grown.head(now: 0, declaredLength: nil) == .arm(at: Self.second))
        #expect(grown.body(now: 1, bytes: 1000) == TimerAction.none)
        #expect(grown.body(now: 2, bytes: 1) == .reject(status: 413))
        #expect(grown.timerFired(now: 5 * Self.second) == TimerAction.none)
    }

    static func framing(_ text: String, cap: Int = 65_536) -> (RequestFramingState, RequestFramingState.Verdict) {
        var state = RequestFramingState(maxBodySize: cap)
        let verdict = state.received(Array(text.utf8))
        return (state, verdict)
    }

    @Test("a chunk declared over the cap is found at its size line, whatever came before it")
    func chunkSizes() {
        let head = "PUT /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        #expect(Self.framing(head + "8000000000000000\r\nab").1 == .tooLarge(prefix: head.utf8.count))
        #expect(Self.framing(head + "ffffffffffffffffffff").1 == .tooLarge(prefix: head.utf8.count))
        #expect(Self.framing(head + "100000\r\n").1 == .tooLarge(prefix: head.utf8.count))
        let first = head + "2;ext=1\r\nab\r\n"
        #expect(Self.framing(first + "100000\r\n").1 == .tooLarge(prefix: first.utf8.count))
        // After a whole request with a Content-Length body, pipelined.
        let earlier = "PUT /x HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello"
        #expect(Self.framing(earlier + head + "20000\r\n").1 == .tooLarge(prefix: (earlier + head).utf8.count))
        // Within the cap, with trailers, and the next request plain.
        let fine = head + "10000\r\n" + String(repeating: "a", count: 65_536) + "\r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\n\r\n"
        let (state, verdict) = Self.framing(fine)
        #expect(verdict == .pass && state.phase == .head)
        // A size line split across reads is still found; the bytes before it already went on.
        var split = RequestFramingState(maxBodySize: 65_536)
        #expect(split.received(Array((head + "1").utf8)) == .pass)
        #expect(split.received(Array("00000".utf8)) == .tooLarge(prefix: 0))
    }

    @Test("what the framing does not follow turns it off, for the parser to decide")
    func framingOff() {
        #expect(Self.framing("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").0.isOff)
        #expect(Self.framing("GET /device HTTP/1.1\r\nUpgrade: websocket\r\n\r\n").0.isOff)
        #expect(Self.framing("PUT /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n").0.isOff)
        #expect(Self.framing("PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").0.isOff)
        #expect(!Self.framing("GET / HTTP/1.1\r\n\r\n").0.isOff)
    }

    @Test("PINGs within the burst and rate pass, a flood does not, and the bucket refills")
    func pingRate() {
        var state = PingRateState(interval: .seconds(1), burst: 3)
        for _ in 0..<3 { #expect(state.received(now: 0) == true) }
        #expect(state.received(now: 0) == false)
        #expect(state.received(now: Self.second / 2) == false)
        #expect(state.received(now: Self.second + Self.second / 2) == true)
        // One a second forever is fine.
        for tick in 3...100 { #expect(state.received(now: Int64(tick) * Self.second) == true) }
        // Hours of quiet refill no more than the burst.
        for _ in 0..<3 { #expect(state.received(now: 10_000 * Self.second) == true) }
        #expect(state.received(now: 10_000 * Self.second) == false)
    }

    @Test("the connection stalled longest is the one closed for room; none when none is stalled")
    func eviction() {
        #expect(StalledConnections.longestStalled([(key: 1, since: 50), (key: 2, since: nil), (key: 3, since: 20), (key: 4, since: 30)]) == 3)
        #expect(StalledConnections.longestStalled([(key: 1, since: Int64?.none), (key: 2, since: nil)]) == nil)
        #expect(StalledConnections.longestStalled([(key: Int, since: Int64?)]()) == nil)
    }
}

/// Log lines at error level and above, kept for a test to read.
final class LogRecords: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var errors: [String] { lines.withLock { $0 } }
}

struct RecordingLogHandler: LogHandler {
    let records: LogRecords
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        if event.level >= .error { records.append("\(event.level) [\(event.source)] \(event.message) \(event.metadata ?? [:])") }
    }
}
