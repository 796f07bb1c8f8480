import NIOCore
import NIOEmbedded
import NIOHTTP1
import PushFleetCore
import Testing

import PushFleetClients

/// The pool's answer reader against NIO's HTTP/1.1 decoder (llhttp), byte for byte, and on what
/// it must refuse.
@Suite("HTTP/1.1 answer reader")
struct HTTP1ResponseParserTests {
    /// How a generated answer's body is framed.
    enum Framing: CaseIterable {
        case length, chunked, close, none
    }

    /// One generated answer: its bytes and what it is.
    struct Generated {
        var bytes: [UInt8]
        var status: Int
        var framing: Framing
    }

    static let names = ["Content-Type", "X-Request-Id", "Set-Cookie", "ETag", "cache-control", "Server", "X_Odd-Name!", "Vary"]
    static let values = ["application/json", "", "a b  c", "max-age=0, private", "\u{E9}t\u{E9}", "=?utf-8?", "\"quoted\"", "x\ty"]

    /// A well-formed answer in one of the forms a backend may send.
    static func answer(_ rng: inout SplitMix64, keepAliveOnly: Bool) -> Generated {
        let framing: Framing = keepAliveOnly ? [.length, .chunked, .none].randomElement(using: &rng)! : Framing.allCases.randomElement(using: &rng)!
        let statuses = framing == .none ? [204, 304] : [200, 201, 202, 301, 400, 401, 404, 409, 429, 500, 503]
        let status = statuses.randomElement(using: &rng)!
        let minor = framing == .close || Int.random(in: 0..<8, using: &rng) > 0 ? 1 : 0
        var head = ""
        if Bool.random(using: &rng), !keepAliveOnly || minor == 1 {
            // An interim answer first, which the reader skips.
            head += "HTTP/1.1 100 Continue\r\n\r\n"
        }
        let reasons = [" OK", " ", "", " Some Reason Here", " \u{E9}"]
        head += "HTTP/1.\(minor) \(status)\(reasons.randomElement(using: &rng)!)\r\n"
        var fields: [(String, String)] = []
        for _ in 0..<Int.random(in: 0...5, using: &rng) {
            fields.append((names.randomElement(using: &rng)!, values.randomElement(using: &rng)!))
        }
        var body = (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        if framing == .none { body = [] }
        var framed: [UInt8] = body
        switch framing {
        case .length, .none:
            if framing == .length || Bool.random(using: &rng) {
                let name = ["Content-Length", "content-length", "CONTENT-LENGTH"].randomElement(using: &rng)!
                fields.insert((name, framing == .none ? String(Int.random(in: 0...50, using: &rng)) : String(body.count)), at: Int.random(in: 0...fields.count, using: &rng))
            }
        case .chunked:
            let coding = ["chunked", "Chunked", "gzip, chunked", " chunked "].randomElement(using: &rng)!
            fields.insert(("Transfer-Encoding", coding), at: Int.random(in: 0...fields.count, using: &rng))
            framed = []
            var rest = body[...]
            while !rest.isEmpty {
                let size = Int.random(in: 1...max(1, rest.count), using: &rng)
                let hex = String(size, radix: 16, uppercase: Bool.random(using: &rng))
                let extensionText = Bool.random(using: &rng) ? "" : ";name=value"
                framed += Array("\(hex)\(extensionText)\r\n".utf8) + rest.prefix(size) + Array("\r\n".utf8)
                rest = rest.dropFirst(size)
            }
            framed += Array("0\r\n".utf8)
            if Bool.random(using: &rng) { framed += Array("Trailer-Field: done\r\n".utf8) }
            framed += Array("\r\n".utf8)
        case .close:
            break
        }
        let connection: String? =
            switch (framing, minor) {
            case (.close, _): ["close", "Close", nil].randomElement(using: &rng)!
            case (_, 0): "keep-alive"
            default: [nil, nil, "keep-alive", "Keep-Alive"].randomElement(using: &rng)!
            }
        if let connection { fields.insert(("Connection", connection), at: Int.random(in: 0...fields.count, using: &rng)) }
        for (name, value) in fields {
            let separator = [": ", ":", ":  ", ":\t"].randomElement(using: &rng)!
            head += "\(name)\(separator)\(value)\(Bool.random(using: &rng) ? " " : "")\r\n"
        }
        head += "\r\n"
        return Generated(bytes: Array(head.utf8) + framed, status: status, framing: framing)
    }

    /// `bytes` cut at random places, as reads may come.
    static func reads(_ bytes: [UInt8], _ rng: inout SplitMix64) -> [ByteBuffer] {
        var cuts = (0..<Int.random(in: 0...6, using: &rng)).map { _ in Int.random(in: 0...bytes.count, using: &rng) }
        cuts = [0] + cuts.sorted() + [bytes.count]
        return zip(cuts, cuts.dropFirst()).map { ByteBuffer(bytes: bytes[$0..<$1]) }
    }

    /// What NIO's decoder reads from the same bytes: each answer's head, body and whether it kept
    /// the connection.
    struct Read: Equatable {
        var status: Int
        var headers: [String]
        var body: [UInt8]
    }

    static func nio(_ reads: [ByteBuffer], answers: Int, close: Bool) throws -> [(Read, Bool)] {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHTTPClientHandlers()
        for _ in 0..<answers {
            try channel.writeOutbound(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")))
            try channel.writeOutbound(HTTPClientRequestPart.end(nil))
        }
        for read in reads { try channel.writeInbound(read) }
        if close { channel.pipeline.fireChannelInactive() }
        var out: [(Read, Bool)] = []
        var current: (Read, Bool)?
        while let part = try channel.readInbound(as: HTTPClientResponsePart.self) {
            switch part {
            case .head(let head):
                guard head.status.code >= 200 else { continue }
                // llhttp keeps a value's trailing whitespace; RFC 9110 §5.5 (and the reader) does not.
                let headers = head.headers.map { "\($0.name): \($0.value.reversed().drop { $0 == " " || $0 == "\t" }.reversed().map(String.init).joined())" }
                current = (Read(status: Int(head.status.code), headers: headers, body: []), head.isKeepAlive)
            case .body(let bytes): current?.0.body += Array(bytes.readableBytesView)
            case .end:
                if let current { out.append(current) }
                current = nil
            }
        }
        _ = try? channel.finish()
        return out
    }

    static func ours(_ reads: [ByteBuffer], answers: Int, close: Bool) throws -> [HTTP1Response] {
        var parser = HTTP1ResponseParser(maxBody: 1 << 20)
        var out: [HTTP1Response] = []
        for var read in reads {
            if let response = try parser.feed(&read) { out.append(response) }
            // What is left of this read may hold the next answer.
            var none = ByteBuffer()
            while out.count < answers, !parser.leftover.isEmpty, let response = try parser.feed(&none) { out.append(response) }
        }
        if close, let response = try parser.end() { out.append(response) }
        return out
    }

    @Test("3,000 well-formed answers, cut into reads at random, read as NIO's decoder reads them")
    func agreesWithNIO() throws {
        var rng = SplitMix64(seed: 0x4854_5450)
        var compared = 0
        for _ in 0..<1_000 {
            // Up to three keep-alive answers on one connection, the last of any framing.
            let count = Int.random(in: 1...3, using: &rng)
            var answers = (1..<count).map { _ in Self.answer(&rng, keepAliveOnly: true) }
            answers.append(Self.answer(&rng, keepAliveOnly: false))
            let close = answers.last!.framing == .close
            let reads = Self.reads(answers.flatMap(\.bytes), &rng)
            let expected = try Self.nio(reads, answers: count, close: close)
            let got = try Self.ours(reads, answers: count, close: close)
            #expect(got.count == expected.count && got.count == count, "\(String(decoding: answers.flatMap(\.bytes), as: UTF8.self))")
            for (index, (response, (read, nioKeepAlive))) in zip(got, expected).enumerated() {
                let mine = Read(status: response.status, headers: response.headers.map { "\($0.name): \($0.value)" }, body: Array(response.body.readableBytesView))
                #expect(mine == read)
                // NIO's head says what the headers say; the reader also knows a body that runs
                // to the close ends the connection.
                #expect(response.keepAlive == (nioKeepAlive && answers[index].framing != .close))
                compared += 1
            }
        }
        #expect(compared >= 1_900)
    }

    static func parse(_ text: String, head: Bool = false, maxBody: Int = 1 << 20, close: Bool = false) throws(HTTP1ParseError) -> HTTP1Response? {
        var parser = HTTP1ResponseParser(maxHead: 1024, maxBody: maxBody)
        parser.expect(body: !head)
        var bytes = ByteBuffer(string: text)
        if let response = try parser.feed(&bytes) { return response }
        return close ? try parser.end() : nil
    }

    @Test(
        "answers that break the grammar are refused",
        arguments: [
            ("HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", "not an HTTP/1.x status line"),
            ("HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n", "status code is not three digits"),
            ("HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", "status code is not three digits"),
            ("HTTP/1.1 099 OK\r\nContent-Length: 0\r\n\r\n", "status code below 100"),
            ("SSH-2.0-OpenSSH_9.2\r\n\r\n", "not an HTTP/1.x status line"),
            ("HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n", "folded field line"),
            ("HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", "field name is not a token"),
            ("HTTP/1.1 200 OK\r\n: nameless\r\n\r\n", "field line without a name"),
            ("HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n", "field line without a name"),
            ("HTTP/1.1 200 OK\r\nX-A: a\u{01}b\r\nContent-Length: 0\r\n\r\n", "control character in a field value"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "Content-Length values disagree"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabcd", "Content-Length values disagree"),
            ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length is not a number"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n", "Content-Length is not a number"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size is not hexadecimal"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n", "chunk longer than its size"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", "101 Switching Protocols to a request that asked for none"),
        ] as [(String, String)]
    )
    func refused(text: String, why: String) {
        #expect(throws: HTTP1ParseError.malformed(why)) { try Self.parse(text) }
    }

    @Test("a head or a body past its limit is refused before it is all read, and a cut answer is truncated")
    func limits() {
        let longHead = "HTTP/1.1 200 OK\r\nX-Pad: " + String(repeating: "a", count: 2_000)
        #expect(throws: HTTP1ParseError.headTooLarge) { try Self.parse(longHead) }
        #expect(throws: HTTP1ParseError.bodyTooLarge) { try Self.parse("HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n", maxBody: 100) }
        #expect(throws: HTTP1ParseError.bodyTooLarge) {
            try Self.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + String(repeating: "x", count: 64) + "\r\n40\r\n", maxBody: 100)
        }
        #expect(throws: HTTP1ParseError.bodyTooLarge) {
            try Self.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n")
        }
        #expect(throws: HTTP1ParseError.bodyTooLarge) { try Self.parse("HTTP/1.1 200 OK\r\n\r\n" + String(repeating: "x", count: 101), maxBody: 100) }
        // Trailer fields that never end are bounded as a head is, each line short.
        #expect(throws: HTTP1ParseError.headTooLarge) {
            try Self.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + String(repeating: "X-T: 1234567890\r\n", count: 100))
        }
        #expect(throws: HTTP1ParseError.truncated) { try Self.parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", close: true) }
        #expect(throws: HTTP1ParseError.truncated) { try Self.parse("HTTP/1.1 200 OK\r\nContent-Le", close: true) }
        #expect(throws: HTTP1ParseError.truncated) { try Self.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", close: true) }
    }

    @Test("bodies framed by what the answer is: none for HEAD, 204 and 304; chunked over a length; the close otherwise")
    func framing() throws {
        let head = try #require(try Self.parse("HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n", head: true))
        #expect(head.body.readableBytes == 0 && head.keepAlive)
        let noContent = try #require(try Self.parse("HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n"))
        #expect(noContent.status == 204 && noContent.body.readableBytes == 0)
        let both = try #require(try Self.parse("HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"))
        #expect(String(buffer: both.body) == "hi" && !both.keepAlive)
        let otherCoding = try #require(try Self.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw bytes", close: true))
        #expect(String(buffer: otherCoding.body) == "raw bytes" && !otherCoding.keepAlive)
        #expect(try Self.parse("HTTP/1.1 200 OK\r\n\r\nuntil the close") == nil)
        let bareLF = try #require(try Self.parse("\r\nHTTP/1.1 200 OK\nContent-Length: 2\nX-A:  spaced  \n\nok"))
        #expect(String(buffer: bareLF.body) == "ok" && bareLF.headers["X-A"] == ["spaced"])
        let old = try #require(try Self.parse("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        #expect(!old.keepAlive)
        let closing = try #require(try Self.parse("HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n"))
        #expect(!closing.keepAlive)
    }

    @Test("Keep-Alive's timeout is read as the seconds the server keeps an idle connection; anything else there announces nothing")
    func keepAliveTimeout() throws {
        let cases: [(String, Int?)] = [
            ("Keep-Alive: timeout=5, max=100", 5),
            ("keep-alive: MAX=3,TIMEOUT=15", 15),
            ("Keep-Alive: timeout = \"7\"", 7),
            ("Keep-Alive: timeout=5\r\nKeep-Alive: timeout=2", 2),
            ("Keep-Alive: timeout=999999999", 86_400),
            ("Keep-Alive: timeout=-1", nil),
            ("Keep-Alive: timeout=5s", nil),
            ("Keep-Alive: timeouts=5", nil),
            ("Keep-Alive: timeout=", nil),
            ("Keep-Alive: timeout=\"", nil),
            ("Keep-Alive: timeout=\"\"", nil),
            ("Keep-Alive: timeout==5", nil),
            ("Keep-Alive: =5, , timeout", nil),
            ("Keep-Alive: timeout=1234567890123456789012", nil),
            ("Keep-Alive: max=5", nil),
            ("X-Keep-Alive: timeout=5", nil),
            ("X-Other: 1", nil),
        ]
        for (field, seconds) in cases {
            let answer = try #require(try Self.parse("HTTP/1.1 200 OK\r\n\(field)\r\nContent-Length: 0\r\n\r\n"))
            #expect(answer.keepAliveTimeout == seconds, "\(field)")
        }
        // An answer's announcement is its own: the next answer on the connection says its own.
        var parser = HTTP1ResponseParser(maxBody: 100)
        var bytes = ByteBuffer(string: "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        #expect(try parser.feed(&bytes)?.keepAliveTimeout == 5)
        let next = try #require(try parser.feed(&bytes))
        #expect(next.keepAliveTimeout == nil)
    }

    @Test("a field name is RFC 9110's token, byte for byte; framing is read from the framing fields' own names only")
    func fieldNames() throws {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max where byte != 0x0A && byte != 0x0D && byte != UInt8(ascii: ":") {
            let text = [UInt8]("HTTP/1.1 200 OK\r\nX".utf8) + [byte] + [UInt8]("Y: v\r\nContent-Length: 0\r\n\r\n".utf8)
            var parser = HTTP1ResponseParser(maxBody: 100)
            var bytes = ByteBuffer(bytes: text)
            let read = Result { () throws(HTTP1ParseError) in try parser.feed(&bytes) }
            if tchar.contains(byte) {
                let response = try #require(try read.get())
                #expect(response.headers.map(\.name) == ["X" + String(decoding: [byte], as: UTF8.self) + "Y", "Content-Length"])
            } else {
                #expect(throws: HTTP1ParseError.malformed("field name is not a token")) { try read.get() }
            }
        }
        // Lookalikes frame nothing: the body runs to the close.
        let lookalike = try #require(
            try Self.parse("HTTP/1.1 200 OK\r\nX-Content-Length: 2\r\nContent-Lengths: 2\r\nConnection-X: close\r\n\r\nabcd", close: true)
        )
        #expect(String(buffer: lookalike.body) == "abcd" && !lookalike.keepAlive && lookalike.headers.count == 3)
        // A non-ASCII letter that lowercases to an ASCII one is not "chunked".
        let kelvin = try #require(try Self.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chun\u{212A}ed\r\n\r\nraw", close: true))
        #expect(String(buffer: kelvin.body) == "raw" && !kelvin.keepAlive)
        // Fields are read from their bytes on demand, each time the same.
        let spaced = try #require(try Self.parse("HTTP/1.1 200 OK\r\nA:\r\nB: \t two  words \t\r\nA: 2\r\nContent-Length: 0\r\n\r\n"))
        #expect(spaced.headers["A"] == ["", "2"] && spaced.headers["b"] == ["two  words"] && spaced.headers.count == 4)
    }
}

@Suite("HTTP/1.1 request writer")
struct HTTP1RequestTests {
    @Test("a request goes out as its line, Host, the headers given and the body's length; NIO's decoder reads it back")
    func bytes() throws {
        let request = try HTTP1Request(
            method: .POST, target: "/api/send?x=1", host: "127.0.0.1:8080",
            headers: [("Authorization", "Basic dTpw"), ("Content-Length", "999"), ("X-Tab", "a\tb \u{E9}")], body: ByteBuffer(string: "{\"a\":1}")
        )
        #expect(
            String(buffer: request.bytes)
                == "POST /api/send?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Basic dTpw\r\nX-Tab: a\tb \u{E9}\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
        )
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
        try channel.writeInbound(request.bytes)
        guard case .head(let head) = try channel.readInbound(as: HTTPServerRequestPart.self) else {
            Issue.record("no request head")
            return
        }
        #expect(head.method == .POST && head.uri == "/api/send?x=1" && head.headers["Content-Length"] == ["7"] && head.headers["X-Tab"] == ["a\tb \u{E9}"])
        guard case .body(let body) = try channel.readInbound(as: HTTPServerRequestPart.self) else {
            Issue.record("no body")
            return
        }
        #expect(String(buffer: body) == "{\"a\":1}")
        _ = try? channel.finish()

        #expect(String(buffer: try HTTP1Request(method: .PUT, target: "/", host: "h", headers: [], body: nil).bytes) == "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
        #expect(String(buffer: try HTTP1Request(method: .GET, target: "/", host: "h", headers: [], body: nil).bytes) == "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(try !HTTP1Request(method: .HEAD, target: "/", host: "h", headers: [], body: nil).expectsBody)
    }

    @Test(
        "a request that would write a header or a request of its own is refused before it is sent",
        arguments: [
            (HTTPMethod.GET, "/a b", [(String, String)]()),
            (.GET, "/a\r\nX-Injected: 1", []),
            (.GET, "", []),
            (.RAW(value: "GE T"), "/", []),
            (.GET, "/", [("X-Token", "abc\r\nX-Injected: 1")]),
            (.GET, "/", [("X-Token", "abc\nGET /other HTTP/1.1")]),
            (.GET, "/", [("X-Token", "nul\u{0}")]),
            (.GET, "/", [("Bad Name", "v")]),
            (.GET, "/", [("", "v")]),
        ] as [(HTTPMethod, String, [(String, String)])]
    )
    func refused(method: HTTPMethod, target: String, headers: [(String, String)]) {
        #expect(throws: FleetHTTPError.self) { try HTTP1Request(method: method, target: target, host: "h", headers: headers, body: nil) }
    }
}
