import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import PushFleetCore
@testable import PushFleetServerSupport
import Testing

/// The push service judges HTTP/2 request blocks itself, with NIO's validation off: the same
/// verdicts as NIO's own validator, which an in-memory server with validation on gives here.
@Suite("HTTP/2 header blocks judged as NIO judges them")
struct HTTP2HeaderBlockRulesTests {
    /// No empty name: NIO's HPACK decoder refuses one, for the whole connection, before any validation.
    static let names = [
        ":method", ":scheme", ":path", ":authority", ":status", ":protocol", ":bogus", ":", "x-ok", "apns-topic", "X-Upper",
        "a b", "te", "connection", "transfer-encoding", "keep-alive", "proxy-connection", "upgrade", "content-type", "x\u{7F}", "é",
        "authorization", "_under", "^tick`", "x\"q",
    ]
    static let values = [
        "GET", "POST", "CONNECT", "https", "/", "/3/device/ab", "", "api.push.apple.com", "trailers", "gzip", "a b", " lead",
        "tail ", "x\r\ny", "nul\u{0}", "lf\n", "tab\t", "del\u{7F}", "é", "ok", "/p?q=1#f", "\u{1}",
    ]

    /// A random block: mostly the shape of a request, with a field or two changed, moved, repeated or dropped.
    static func block(_ rng: inout SplitMix64, trailers: Bool) -> [(String, String)] {
        var fields: [(String, String)] = trailers
            ? [("x-ok", "1"), ("grpc-status", "0")]
            : [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/ab"), (":authority", "h"), ("x-ok", "1")]
        for _ in 0..<Int.random(in: 0...2, using: &rng) {
            switch Int.random(in: 0..<5, using: &rng) {
            case 0: fields.insert((names.randomElement(using: &rng)!, values.randomElement(using: &rng)!), at: Int.random(in: 0...fields.count, using: &rng))
            case 1: if !fields.isEmpty { fields.remove(at: Int.random(in: 0..<fields.count, using: &rng)) }
            case 2: if !fields.isEmpty { fields[Int.random(in: 0..<fields.count, using: &rng)].1 = values.randomElement(using: &rng)! }
            case 3: if !fields.isEmpty { fields[Int.random(in: 0..<fields.count, using: &rng)].0 = names.randomElement(using: &rng)! }
            default: fields.shuffle(using: &rng)
            }
        }
        return fields
    }

    /// A HEADERS frame of literals without indexing or Huffman coding, so NIO decodes exactly these fields.
    static func headersFrame(stream: UInt32, _ fields: [(String, String)], endStream: Bool) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            block += [0x00] + HTTP2Wire.integer(name.utf8.count) + Array(name.utf8) + HTTP2Wire.integer(value.utf8.count) + Array(value.utf8)
        }
        return HTTP2Wire.frame(type: HTTP2Wire.headersType, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, block)
    }

    /// NIO's verdict: whether a server with its validation on resets stream 1 rather than
    /// passing the block on (as trailers, after a well-formed request's block).
    static func nioRefuses(_ fields: [(String, String)], trailers: Bool) throws -> Bool {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var bytes = HTTP2Wire.preface
        if trailers {
            bytes += headersFrame(stream: 1, [(":method", "POST"), (":scheme", "https"), (":path", "/"), (":authority", "h")], endStream: false)
        }
        bytes += headersFrame(stream: 1, fields, endStream: true)
        do { try channel.writeInbound(ByteBuffer(bytes: bytes)) } catch {}
        channel.pipeline.fireChannelReadComplete()
        channel.flush()
        var written: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { written += buffer.readableBytesView }
        let resets = HTTP2Wire.frames(written).contains { $0.type == 3 && $0.stream == 1 }
        let goAway = HTTP2Wire.frames(written).contains { $0.type == HTTP2Wire.goAwayType }
        #expect(!goAway, "a block is a stream error, never the connection's: \(fields)")
        return resets
    }

    static func ours(_ fields: [(String, String)], trailers: Bool) -> Bool {
        let block = HPACKHeaders(fields)
        return !(trailers ? HTTP2HeaderBlockRules.isValidTrailers(block) : HTTP2HeaderBlockRules.isValidRequest(block))
    }

    @Test("3,000 random request blocks and 1,000 random trailer blocks: the same verdict as NIO's validator")
    func sameVerdicts() throws {
        var rng = SplitMix64(seed: 9113)
        var refused = (nio: 0, ours: 0)
        for index in 0..<4_000 {
            let trailers = index >= 3_000
            let fields = Self.block(&rng, trailers: trailers)
            let nio = try Self.nioRefuses(fields, trailers: trailers)
            let ours = Self.ours(fields, trailers: trailers)
            #expect(nio == ours, "\(trailers ? "trailers" : "request") \(fields): NIO \(nio ? "refuses" : "takes"), ours \(ours ? "refuses" : "takes")")
            if nio { refused.nio += 1 }
            if ours { refused.ours += 1 }
        }
        // Both kinds of verdict were exercised.
        #expect(refused.nio > 1_000 && refused.nio < 3_000, "\(refused)")
    }

    typealias Case = (fields: [(String, String)], valid: Bool)
    static let cases: [Case] = [
        ([(":method", "GET"), (":scheme", "http"), (":path", "/")], true),
        ([(":method", "GET"), (":scheme", "http")], false),
        ([(":method", "GET"), (":path", "/"), (":scheme", "http"), (":path", "/")], false),
        ([(":method", "GET"), ("x", "1"), (":scheme", "http"), (":path", "/")], false),
        ([(":method", "GET"), (":scheme", "http"), (":path", "")], false),
        ([(":method", "GET"), (":scheme", "http"), (":path", "/a b")], false),
        ([(":method", "GET"), (":scheme", "http"), (":path", "/"), (":status", "200")], false),
        ([(":method", "GET"), (":scheme", "http"), (":path", "/"), (":protocol", "websocket")], false),
        ([(":method", "GET"), (":scheme", "http"), (":path", "/"), ("Upper", "1")], false),
        ([(":method", "GET"), (":scheme", "http"), (":path", "/"), ("connection", "close")], false),
        ([(":method", "GET"), (":scheme", "http"), (":path", "/"), ("te", "gzip")], false),
        ([(":method", "GET"), (":scheme", "http"), (":path", "/"), ("te", "trailers")], true),
        ([(":method", "GET"), (":scheme", "http"), (":path", "/"), ("x", "a\r\nb")], false),
        ([(":method", "GET"), (":scheme", "http"), (":path", "/"), ("x", " padded\t")], true),
        ([(":method", "CONNECT"), (":authority", "h:443")], true),
        ([(":method", "CONNECT"), (":authority", "h:443"), (":path", "/")], false),
    ]

    @Test("named cases: each rule of RFC 9113 §8.2–8.3 refuses on its own")
    func namedCases() throws {
        for (fields, valid) in Self.cases {
            #expect(HTTP2HeaderBlockRules.isValidRequest(HPACKHeaders(fields)) == valid, "\(fields)")
            #expect(try !Self.nioRefuses(fields, trailers: false) == valid, "\(fields)")
        }
    }
}
