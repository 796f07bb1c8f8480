import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

/// The push port's HTTP/1.1 fast path: the head reader's subset, the connection's lifecycle with
/// an injected clock, and the real push service answering over sockets.
@Suite("The HTTP/1.1 fast path")
struct HTTP1FastPathTests {
    static func scan(_ text: String) -> HTTP1RequestScan.Outcome {
        Array(text.utf8).withUnsafeBytes { HTTP1RequestScan.scan($0) }
    }

    static func head(_ text: String) -> HTTP1RequestScan.Head? {
        if case .request(let head) = scan(text) { return head }
        return nil
    }

    static func isUnsupported(_ text: String) -> Bool {
        if case .unsupported = scan(text) { return true }
        return false
    }

    @Test("a provider request's head is read as NIO's conversion reads it")
    func readsHead() throws {
        let text = "POST /3/device/ab HTTP/1.1\r\nHost: push.test:443\r\nAuthorization: bearer x.y.z\r\napns-topic:  t \r\n"
            + "Connection: keep-alive\r\nContent-Length: 21\r\n\r\n{\"aps\":{\"alert\":\"x\"}}"
        let head = try #require(Self.head(text))
        #expect(head.request.method == .post)
        #expect(head.request.path == "/3/device/ab")
        #expect(head.request.authority == "push.test:443")
        #expect(head.request.headerFields[.authorization] == "bearer x.y.z")
        #expect(head.request.headerFields[HTTPField.Name("apns-topic")!] == "t")
        #expect(head.request.headerFields[HTTPField.Name("host")!] == nil)
        #expect(head.contentLength == 21)
        #expect(head.length == text.utf8.count - 21)
        #expect(!head.closes)
        #expect(Self.head("GET /health HTTP/1.1\r\nconnection: Close\r\n\r\n")?.closes == true)
        #expect(Self.head("GET /health HTTP/1.1\r\n\r\n")?.contentLength == 0)
    }

    @Test("a head not yet whole is incomplete, at every cut")
    func incomplete() {
        let text = "POST /3/device/ab HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"
        for cut in 0..<text.utf8.count {
            let prefix = String(decoding: Array(text.utf8)[0..<cut], as: UTF8.self)
            guard case .incomplete = Self.scan(prefix) else {
                Issue.record("\(cut) bytes: not incomplete")
                continue
            }
        }
    }

    /// Heads outside the subset, each for its own reason.
    static let unsupportedForms = [
        "POST /a HTTP/1.0\r\n\r\n",
        "POST http://x/a HTTP/1.1\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\n\r\n",
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "post /a HTTP/1.1\r\n\r\n",
        "HEAD /a HTTP/1.1\r\n\r\n",
        "PATCH /a HTTP/1.1\r\n\r\n",
        "POST  /a HTTP/1.1\r\n\r\n",
        "POST /a  HTTP/1.1\r\n\r\n",
        "POST /a\u{7F} HTTP/1.1\r\n\r\n",
        "POST /é HTTP/1.1\r\n\r\n",
        "\r\nPOST /a HTTP/1.1\r\n\r\n",
        "POST /a HTTP/1.1\nHost: x\r\n\r\n",
        "POST /a HTTP/1.1\r\nHost: x\nA: b\r\n\r\n",
        "POST /a HTTP/1.1\r\nA: b\rc\r\n\r\n",
        "POST /a HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
        "POST /a HTTP/1.1\r\nA : b\r\n\r\n",
        "POST /a HTTP/1.1\r\nA b\r\n\r\n",
        "POST /a HTTP/1.1\r\n: b\r\n\r\n",
        "POST /a HTTP/1.1\r\nA: b\u{01}\r\n\r\n",
        "POST /a HTTP/1.1\r\nA: é\r\n\r\n",
        "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST /a HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
        "POST /a HTTP/1.1\r\nContent-Length: +2\r\n\r\nab",
        "POST /a HTTP/1.1\r\nContent-Length: 2 2\r\n\r\nab",
        "POST /a HTTP/1.1\r\nContent-Length: 0x2\r\n\r\nab",
        "POST /a HTTP/1.1\r\nContent-Length: \r\n\r\n",
        "POST /a HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\n",
        "POST /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET /device HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
        "GET /a HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\n\r\n",
        "POST /a HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
        "POST /a HTTP/1.1\r\n" + String(repeating: "A: b\r\n", count: HTTP1RequestScan.maxFields + 1) + "\r\n",
        "POST /a HTTP/1.1\r\nA: " + String(repeating: "b", count: HTTP1RequestScan.maxHeadLength) + "\r\n\r\n",
        "POST /" + String(repeating: "a", count: HTTP1RequestScan.maxHeadLength),
    ]

    @Test("forms outside the subset go on to the full parser, never answered here")
    func unsupported() {
        for form in Self.unsupportedForms {
            #expect(Self.isUnsupported(form), "\(form.debugDescription.prefix(120))")
        }
    }

    /// Every head read here is the head NIO's decoder and conversion make of the same bytes.
    @Test("every head it reads, NIO's parser reads alike")
    func agreesWithNIO() throws {
        var generator = SystemRandomNumberGenerator()
        let names = ["Host", "authorization", "apns-topic", "Content-Length", "connection", "x-a", "X_b", "accept"]
        let values = ["", "x", " spaced out ", "close", "keep-alive", "a\tb", "12", "0", "bearer a.b.c", "!#$%&'*+-.^_`|~"]
        let targets = ["/", "/3/device/ab", "/v1/projects/p/messages:send", "/a?b=c", "/%41", "/a/../b"]
        for _ in 0..<400 {
            var head = "\(["POST", "GET", "PUT", "DELETE"].randomElement(using: &generator)!) \(targets.randomElement(using: &generator)!) HTTP/1.1\r\n"
            var length = 0
            var sawLength = false
            for _ in 0..<Int.random(in: 0...6, using: &generator) {
                let name = names.randomElement(using: &generator)!
                var value = values.randomElement(using: &generator)!
                if name == "Content-Length" {
                    guard !sawLength else { continue }
                    sawLength = true
                    length = Int.random(in: 0...40, using: &generator)
                    value = String(length)
                }
                head += "\(name):\(Bool.random(using: &generator) ? " " : "")\(value)\r\n"
            }
            let text = head + "\r\n" + String(repeating: "b", count: length)
            guard let ours = Self.head(text) else { continue }
            let theirs = try Self.nioHead(text)
            #expect(ours.request.method == theirs.request.method, "\(text)")
            #expect(ours.request.path == theirs.request.path, "\(text)")
            #expect(ours.request.authority == theirs.request.authority, "\(text)")
            #expect(ours.request.headerFields == theirs.request.headerFields, "\(text)")
            #expect(ours.contentLength == theirs.body, "\(text)")
        }
    }

    /// One connection's heads read in turn with its memo: each reads exactly as it reads alone.
    @Test("a head read after others on one connection, its repeated lines taken from the memo, reads as it reads alone")
    func memoAgrees() {
        var generator = SystemRandomNumberGenerator()
        let lines = [
            "Host: push.test\r\n", "host: other\r\n", "authorization: bearer a.b.c\r\n", "apns-topic: t\r\n", "apns-id: 1\r\n", "apns-id: 2\r\n",
            "Content-Length: 2\r\n", "content-length: 3\r\n", "connection: close\r\n", "Connection: keep-alive\r\n", "x-a:  spaced \r\n",
            "Upgrade: h2c\r\n", "A: b\rc\r\n", "Transfer-Encoding: chunked\r\n", "A : b\r\n", "x-b: \u{e9}\r\n", "Content-Length: x\r\n",
            "traceparent: 00-1-01\r\n", "traceparent: 00-2-01\r\n", "apns-id: \(String(repeating: "9", count: 2100))\r\n",
        ]
        let requestLines = ["POST /3/device/ab HTTP/1.1\r\n", "GET /health HTTP/1.1\r\n", "POST /a HTTP/1.0\r\n"]
        var memo = HTTP1RequestScan.LineMemo()
        var previous: [String] = []
        for round in 0..<3000 {
            // Mostly the previous head's lines again; some changed, dropped or added.
            var fieldLines = previous.compactMap { line -> String? in
                switch Int.random(in: 0..<12, using: &generator) {
                case 0: nil
                case 1, 2: lines.randomElement(using: &generator)!
                default: line
                }
            }
            if fieldLines.isEmpty || Bool.random(using: &generator) {
                fieldLines.insert(lines.randomElement(using: &generator)!, at: Int.random(in: 0...fieldLines.count, using: &generator))
            }
            previous = fieldLines
            let bytes = Array((requestLines.randomElement(using: &generator)! + fieldLines.joined() + "\r\nabc").utf8)
            let alone = bytes.withUnsafeBytes { HTTP1RequestScan.scan($0) }
            let remembered = bytes.withUnsafeBytes { HTTP1RequestScan.scan($0, memo: &memo) }
            if case .request(let head) = remembered {
                #expect(memo.keptBytes < head.length, "round \(round): the memo keeps more than the head read")
            }
            #expect(remembered.description == alone.description, "round \(round): \(String(decoding: bytes, as: UTF8.self).debugDescription)")
        }
        // Forms outside the subset stay outside once their lines are remembered.
        for form in Self.unsupportedForms {
            let bytes = Array(form.utf8)
            for _ in 0..<2 {
                let outcome = bytes.withUnsafeBytes { HTTP1RequestScan.scan($0, memo: &memo) }
                #expect(outcome.description == "unsupported", "\(form.debugDescription.prefix(120))")
            }
        }
    }

    /// A line too long for the memo (over 2,048 bytes) between two heads with the line it
    /// replaced: the third head reads as it is, not with the second head's fields.
    @Test("a line the memo does not keep leaves no stale line behind")
    func memoLongLine() {
        let long = "apns-id: \(String(repeating: "9", count: 2100))\r\n"
        let heads = [
            ["apns-id: 1\r\n", "apns-topic: t\r\n"], [long, "apns-topic: t\r\n"], ["apns-id: 1\r\n", "apns-topic: t\r\n"],
            ["host: a\r\n", "apns-id: 2\r\n"], ["host: b\r\n", "apns-id: 3\r\n"], ["host: b\r\n", long], ["host: b\r\n", "apns-id: 3\r\n"],
            ["apns-id: 4\r\n", "traceparent: 00-1-01\r\n"], ["apns-id: 5\r\n", "traceparent: 00-2-01\r\n"], ["apns-id: 5\r\n", "traceparent: 00-2-01\r\n"],
            ["apns-id: 6\r\n", "host: c\r\n"], ["host: c\r\n", "apns-id: 6\r\n"], ["apns-id: 7\r\n"], ["apns-id: 8\r\n", "apns-topic: t\r\n", "a: b\r\n"],
        ]
        var memo = HTTP1RequestScan.LineMemo()
        for (round, lines) in heads.enumerated() {
            let bytes = Array(("POST /3/device/ab HTTP/1.1\r\n" + lines.joined() + "\r\n").utf8)
            let alone = bytes.withUnsafeBytes { HTTP1RequestScan.scan($0) }
            let remembered = bytes.withUnsafeBytes { HTTP1RequestScan.scan($0, memo: &memo) }
            #expect(remembered.description == alone.description, "head \(round)")
        }
    }

    /// A line new on every head (a request id) stops being copied into the memo; once it stays
    /// the same it is kept again within 64 heads. Every head reads as it reads alone.
    @Test("a line that changes on every head is not kept, and is kept again once it settles")
    func memoVolatileLine() {
        let topic = "apns-topic: t\r\n"
        var memo = HTTP1RequestScan.LineMemo()
        func read(_ id: String) -> Int {
            let bytes = Array(("POST /3/device/ab HTTP/1.1\r\n" + topic + "apns-id: \(id)\r\n\r\n").utf8)
            let alone = bytes.withUnsafeBytes { HTTP1RequestScan.scan($0) }
            let remembered = bytes.withUnsafeBytes { HTTP1RequestScan.scan($0, memo: &memo) }
            #expect(remembered.description == alone.description, "apns-id \(id)")
            return memo.keptBytes
        }
        #expect(read("first") == topic.utf8.count + "apns-id: first\r\n".utf8.count)
        var kept = 0
        for number in 0..<10 { kept = read("id-\(number)") }
        #expect(kept == topic.utf8.count, "a line changed on ten heads in turn is no longer kept")
        var keptAgain = false
        for _ in 0..<64 where !keptAgain {
            keptAgain = read("settled") == topic.utf8.count + "apns-id: settled\r\n".utf8.count
        }
        #expect(keptAgain, "a line that stays the same is kept again within 64 heads")
        #expect(read("settled") == topic.utf8.count + "apns-id: settled\r\n".utf8.count, "and stays kept while it matches")
    }

    /// NIO's decoder and `HTTP1ToHTTPServerCodec` on an embedded channel: the request and its body's length.
    static func nioHead(_ text: String) throws -> (request: HTTPRequest, body: Int) {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try channel.writeInbound(ByteBuffer(string: text))
        var request: HTTPRequest?
        var body = 0
        while let part = try channel.readInbound(as: HTTPRequestPart.self) {
            switch part {
            case .head(let head): request = head
            case .body(let bytes): body += bytes.readableBytes
            case .end: break
            }
        }
        _ = try? channel.finish()
        return (try #require(request), body)
    }

    @Test("the connection's lifecycle: one idle timer looked at again, hand-over once, quiesce closes")
    func lifecycle() {
        var state = HTTP1FastPathState(idleTimeout: .seconds(10))
        let second: Int64 = 1_000_000_000
        // Armed at the first bytes (the header timeout bounds a connection before them), once.
        _ = state.bytesArrived(now: 0)
        let armed = state.firstBytes(now: 0)
        let armedAgain = state.firstBytes(now: 1)
        #expect(armed == .armIdleTimer(at: 10 * second) && armedAgain == .none)
        let endedQuiet = state.bytesArrived(now: 4 * second)
        #expect(!endedQuiet)
        #expect(state.idleTimerFired(now: 10 * second) == .armIdleTimer(at: 14 * second))
        #expect(state.idleTimerFired(now: 14 * second) == .close)
        #expect(state.mode == .closed)

        // Kept alive between requests: quiet from the end of a read that answered all it held
        // to the next bytes, once per phase.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        let first = state.bytesArrived(now: 1)
        let began = state.readEnded(holdingPartialRequest: false, now: 1)
        let again = state.readEnded(holdingPartialRequest: false, now: 1)
        #expect(!first && began == .quietBegan && again == .none && state.quiet)
        let ended = state.bytesArrived(now: 2)
        #expect(ended && !state.quiet)
        #expect(state.handOver() == .handOver)
        #expect(state.handOver() == .none)
        #expect(state.idleTimerFired(now: 100 * second) == .none)
        #expect(state.quiesce() == .none)

        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        #expect(state.quiesce() == .close)
        #expect(state.handOver() == .none)
    }

    @Test("a request in pieces is held while it comes quickly: for its reads and its grace, then handed over")
    func partialHold() {
        let grace = HTTP1FastPathState.partialGrace
        let ms: Int64 = 1_000_000
        // The head in one read, the body in the next: one timer armed, nothing handed over.
        var state = HTTP1FastPathState(idleTimeout: .seconds(10))
        #expect(state.readEnded(holdingPartialRequest: true, now: 5 * ms) == .armPartialTimer(at: 5 * ms + grace))
        #expect(state.partialSince == 5 * ms)
        state.requestEnded()
        #expect(state.readEnded(holdingPartialRequest: false, now: 6 * ms) == .quietBegan)
        #expect(state.partialSince == nil && state.mode == .answering)
        // The timer, armed once, lapses with nothing held; the next request in pieces arms it anew.
        #expect(state.partialTimerFired(now: 5 * ms + grace) == .none)
        #expect(state.readEnded(holdingPartialRequest: true, now: 900 * ms) == .armPartialTimer(at: 900 * ms + grace))
        // A younger request in pieces when the timer fires: looked at again at its own end.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        _ = state.readEnded(holdingPartialRequest: true, now: 0)
        state.requestEnded()
        #expect(state.readEnded(holdingPartialRequest: true, now: 100 * ms) == .none, "the timer is armed")
        #expect(state.partialSince == 100 * ms, "a request answered in between: the part held is a new request's")
        #expect(state.partialTimerFired(now: grace) == .armPartialTimer(at: 100 * ms + grace))
        #expect(state.partialTimerFired(now: 100 * ms + grace) == .handOver)
        #expect(state.mode == .handedOver && state.partialSince == 100 * ms)
        // Past the reads allowed, handed over at once, however quick.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        for read in 0..<HTTP1FastPathState.partialReads {
            let action = state.readEnded(holdingPartialRequest: true, now: Int64(read))
            #expect(action == (read == 0 ? .armPartialTimer(at: grace) : .none), "read \(read)")
        }
        #expect(state.readEnded(holdingPartialRequest: true, now: 10) == .handOver)
        // Past the grace, at the end of a read, without waiting for the timer.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        _ = state.readEnded(holdingPartialRequest: true, now: 0)
        #expect(state.readEnded(holdingPartialRequest: true, now: grace) == .handOver)
        // An answer owed or a request lent takes the part held with it: the grace begins anew.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        _ = state.readEnded(holdingPartialRequest: true, now: 0)
        state.owe()
        #expect(state.partialSince == nil)
        #expect(state.owedAnswerWritten(now: grace) == .resume)
        #expect(state.readEnded(holdingPartialRequest: true, now: grace + 1) == .none)
        #expect(state.partialSince == grace + 1)
        #expect(state.partialTimerFired(now: grace) == .armPartialTimer(at: 2 * grace + 1))
        // A request completed and a later one handed over within the same read: the later one's
        // header timeout does not count from when the earlier began.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        _ = state.readEnded(holdingPartialRequest: true, now: 0)
        state.requestEnded()
        #expect(state.handOver() == .handOver && state.partialSince == nil)
    }

    /// The embedded system with these limits on the push port, given that port.
    static func run(_ limits: ServerLimits, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushServer.limits = limits
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            try await body(Int(system.pushService.split(separator: ":").last!)!)
        }
    }

    @Test("the push port answers pipelined provider requests in order, and one sent in pieces, and the rest as before")
    func overSocket() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let port = Int(system.pushService.split(separator: ":").last!)!
            let token = String(repeating: "ab", count: 32)
            let body = #"{"aps":{"alert":"x"}}"#
            let apns = "POST /3/device/\(token) HTTP/1.1\r\nHost: x\r\napns-topic: t\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            let closing = "POST /3/device/\(token) HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            // Thirty in one write, answered here, in order (no provider token: 403 each); the
            // last asks to close, so that the exchange ends when its answer is written.
            let many = try await RawSocket.exchange(port: port, String(repeating: apns, count: 29) + closing, waitFor: .seconds(60))
            #expect(many.response.components(separatedBy: "HTTP/1.1 403 Forbidden\r\n").count == 31, "\(many.response.prefix(300))")
            #expect(many.response.components(separatedBy: "MissingProviderToken").count == 31)
            #expect(many.closed)

            // The head, then the body a moment later: the full pipeline takes the connection,
            // answers alike, and keeps answering what follows.
            let split = Array(apns.utf8)
            let cut = split.count - body.utf8.count
            let pieces = try await RawSocket.exchange(
                port: port,
                [(.zero, Array(split[..<cut])), (.milliseconds(200), Array(split[cut...]) + split + Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))],
                waitFor: .seconds(60)
            )
            let statuses = pieces.response.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
            #expect(statuses == ["403", "403", "200"], "\(pieces.response)")

            // A malformed request after answered ones is the full parser's: 400, closed.
            let bad = try await RawSocket.exchange(port: port, apns + "POST /3/device/\(token) HTTP/1.1\r\nContent-Length: x\r\n\r\n", waitFor: .seconds(30))
            let badStatuses = bad.response.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
            #expect(badStatuses == ["403", "400"], "\(bad.response)")
            #expect(bad.closed)

            // Pushes still reach a device whose socket upgraded on this port.
            let device = try await system.device("bob", .apns)
            #expect(try await system.sendPlain(from: "alice", to: "bob", pns: "apns", message: "hi").status == 200)
            #expect(try await device.waitForPushes(1).count == 1)
        }
    }

    @Test("after answers here, the guards hold for the pipeline behind: a chunk over the cap gets 413, an unfinished head 408")
    func guardsAfterHandOver() async throws {
        let path = "/3/device/" + String(repeating: "ab", count: 32)
        let apns = "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        @Sendable func statuses(_ exchange: RawSocket.Exchange) -> [Substring] {
            exchange.response.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
        }
        try await Self.run(ServerLimits()) { port in
            let chunk = try await RawSocket.exchange(
                port: port, apns + "POST \(path) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFF\r\n", waitFor: .seconds(60)
            )
            #expect(statuses(chunk) == ["403", "413"], "\(chunk.response)")
            #expect(chunk.closed)
        }
        // The handed-over request's head is owed within the header timeout from the hand-over;
        // the first request's too, from the connect, so the timeout leaves a loaded machine room.
        try await Self.run(ServerLimits(idleTimeout: .seconds(60), headerTimeout: .seconds(5), bodyTimeout: .seconds(60))) { port in
            let unfinished = try await RawSocket.exchange(port: port, apns + "POST \(path) HTTP/1.1\r\nHost: x\r\n", waitFor: .seconds(60))
            #expect(statuses(unfinished) == ["403", "408"], "\(unfinished.response)")
            #expect(unfinished.closed)
        }
    }

    /// A full server makes room by closing a connection kept alive between requests once it has
    /// been quiet for ten eviction graces, at least 10 s: well before the 120 s timeouts here.
    @Test("a full push port closes a provider connection kept alive between requests to answer a newcomer")
    func quietEvicted() async throws {
        try await Self.run(ServerLimits(maxConnections: 2, idleTimeout: .seconds(120), headerTimeout: .seconds(120), bodyTimeout: .seconds(120))) { port in
            let apns = Array("POST /3/device/\(String(repeating: "ab", count: 32)) HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}".utf8)
            // Two provider connections answered at the fast path, then held open and silent.
            // Held for 40 s by the client, so that the one not closed for room ends the test then.
            async let first = RawSocket.exchange(port: port, [(.zero, apns)], waitFor: .seconds(40))
            async let second = RawSocket.exchange(port: port, [(.zero, apns)], waitFor: .seconds(40))
            try await Task.sleep(for: .milliseconds(500))
            let newcomer = try await RawSocket.exchange(port: port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", waitFor: .seconds(60))
            #expect(newcomer.response.hasPrefix("HTTP/1.1 200"), "\(newcomer)")
            let held = try await [first, second]
            #expect(held.contains { $0.response.hasPrefix("HTTP/1.1 403") && $0.closed }, "no answered connection was closed for room: \(held)")
        }
    }

    /// That reads put the timeout off is the lifecycle test's (a clock here would make it a timing test).
    @Test("a connection quiet past the idle timeout is closed")
    func idleTimeout() async throws {
        try await Self.run(ServerLimits(idleTimeout: .seconds(2), headerTimeout: .seconds(30), bodyTimeout: .seconds(30))) { port in
            let token = String(repeating: "ab", count: 32)
            let apns = Array("POST /3/device/\(token) HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}".utf8)
            let quiet = try await RawSocket.exchange(port: port, [(.zero, apns)], waitFor: .seconds(20))
            #expect(quiet.closed, "an idle fast-path connection was left open")
            #expect(quiet.response.hasPrefix("HTTP/1.1 403"))
        }
    }
}
