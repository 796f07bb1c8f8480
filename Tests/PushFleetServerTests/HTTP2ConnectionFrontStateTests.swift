import HTTPTypes
import NIOCore
import NIOHPACK
@testable import PushFleetServerSupport
import Testing

/// The bytes of an HTTP/2 connection before NIO's handler: what is answered there, what goes on
/// to NIO and in which order, and what NIO's decoder makes of the blocks it is given. No channel.
@Suite("An HTTP/2 connection's front")
struct HTTP2ConnectionFrontStateTests {
    typealias State = HTTP2ConnectionFrontState
    static let prefaceBytes = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    static let settings = HTTP2Wire.frame(type: 4, flags: 0, stream: 0, [])
    static let token = String(repeating: "ab", count: 32)
    static let alert = Array(#"{"aps":{"alert":"x"}}"#.utf8)

    /// Claims POSTs to `/3/device/…` with a 64-byte body limit.
    static func claim(_ head: HTTPRequest) -> EventLoopRoute? {
        guard head.method == .post, let path = head.path, path.hasPrefix("/3/device/") else { return nil }
        return EventLoopRoute(kind: 0, parameter: Substring(path.dropFirst(10)), bodyLimit: 64)
    }

    static func push(_ stream: UInt32, body: [UInt8] = alert, end: Bool = true, extra: [(String, String)] = []) -> [UInt8] {
        HTTP2Wire.headers(stream: stream, path: "/3/device/\(token)", extra: [("apns-topic", "com.example.app")] + extra, endStream: false)
            + HTTP2Wire.data(stream: stream, body, endStream: end)
    }

    static func get(_ stream: UInt32, path: String = "/health") -> [UInt8] {
        let fields = [(":method", "GET"), (":scheme", "http"), (":path", path), (":authority", "localhost")]
        var block: [UInt8] = []
        for (name, value) in fields {
            block += [0x00] + HTTP2Wire.integer(name.utf8.count) + Array(name.utf8) + HTTP2Wire.integer(value.utf8.count) + Array(value.utf8)
        }
        return HTTP2Wire.frame(type: HTTP2Wire.headersType, flags: 0x5, stream: stream, block)
    }

    static let ok = CompleteResponse(status: .ok, headers: [HTTPField.Name("apns-id")!: "1234"])

    /// Feeds `bytes` and answers every claimed request with `answer` (nil: hand it on); the
    /// streams answered here, and the failure if any.
    @discardableResult
    static func run(_ state: inout State, _ bytes: [UInt8], answer: CompleteResponse? = ok, complete: Bool = true) -> (answered: [UInt32], failure: UInt32?) {
        state.receive(ByteBuffer(bytes: bytes))
        var answered: [UInt32] = []
        while let event = state.next(claim: claim) {
            switch event {
            case .answer(let id, _, _, _):
                if let answer, state.answered(id, answer) { answered.append(id) } else { state.handOver(id) }
            case .fail(let code):
                return (answered, code)
            }
        }
        if complete { state.readComplete() }
        return (answered, nil)
    }

    static func bytes(_ buffer: inout ByteBuffer) -> [UInt8] {
        defer { buffer.clear() }
        return Array(buffer.readableBytesView)
    }

    /// The frames NIO's handler was given after the preface, its blocks decoded by one decoder
    /// that lives as long as the connection, as NIO's does.
    struct NIOSide {
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var prefaceSeen = false

        mutating func read(_ bytes: [UInt8]) throws -> [(type: UInt8, flags: UInt8, stream: UInt32, fields: HPACKHeaders?)] {
            var bytes = bytes
            if !prefaceSeen {
                #expect(Array(bytes.prefix(24)) == HTTP2ConnectionFrontStateTests.prefaceBytes)
                bytes.removeFirst(24)
                prefaceSeen = true
            }
            var result: [(type: UInt8, flags: UInt8, stream: UInt32, fields: HPACKHeaders?)] = []
            var pending: [UInt8] = []
            for frame in HTTP2Wire.frames(bytes) {
                if frame.type == 1 || frame.type == 9 {
                    pending += frame.payload
                    guard frame.flags & 0x4 != 0 else { continue }
                    var block = ByteBuffer(bytes: pending)
                    pending = []
                    result.append((1, frame.flags, frame.stream, try decoder.decodeHeaders(from: &block)))
                } else {
                    result.append((frame.type, frame.flags, frame.stream, nil))
                }
            }
            return result
        }
    }

    @Test("a claimed request is answered in one HEADERS frame ending its stream; the preface and SETTINGS go on to NIO untouched")
    func answered() throws {
        var state = State()
        let (answered, failure) = Self.run(&state, Self.prefaceBytes + Self.settings + Self.push(1) + Self.push(3))
        #expect(failure == nil)
        #expect(answered == [1, 3])
        #expect(Self.bytes(&state.forward) == Self.prefaceBytes + Self.settings)
        let out = HTTP2Wire.frames(Self.bytes(&state.output))
        #expect(out.map(\.stream) == [1, 3])
        for frame in out {
            #expect(frame.type == 1 && frame.flags == 0x5)
            var block = ByteBuffer(bytes: frame.payload)
            var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
            let fields = try decoder.decodeHeaders(from: &block)
            #expect(fields.map { "\($0.name): \($0.value)" } == [":status: 200", "apns-id: 1234", "content-length: 0"])
            // `:status` from the static table, the rest literals not indexed: the client's table
            // stays as NIO's encoder left it.
            #expect(frame.payload == [0x88, 0x00, 7] + Array("apns-id".utf8) + [4] + Array("1234".utf8) + [0x0F, 0x0D, 1, UInt8(ascii: "0")])
        }
        #expect(state.heldStreams == 0)
    }

    @Test("blocks the client's encoder indexed, some answered here and some given to NIO: NIO's decoder reads every given block as the client wrote it")
    func hpackInStep() throws {
        var client = HPACKEncoder(allocator: ByteBufferAllocator())
        func block(_ stream: UInt32, method: String, path: String, extra: [(String, String)]) throws -> [UInt8] {
            var fields = HPACKHeaders([(":method", method), (":scheme", "https"), (":path", path), (":authority", "api.example")])
            for (name, value) in extra { fields.add(name: name, value: value) }
            var out = ByteBuffer()
            try client.encode(headers: fields, to: &out)
            return HTTP2Wire.frame(type: 1, flags: method == "GET" ? 0x5 : 0x4, stream: stream, Array(out.readableBytesView))
        }
        var state = State()
        var nio = NIOSide()
        var given: [(UInt32, String?)] = []
        var all = Self.prefaceBytes + Self.settings
        for round in 0..<6 {
            let stream = UInt32(1 + 4 * round)
            all += try block(stream, method: "POST", path: "/3/device/\(Self.token)", extra: [("apns-topic", "t\(round % 2)"), ("x-round", "\(round)")])
            all += HTTP2Wire.data(stream: stream, Self.alert, endStream: true)
            all += try block(stream + 2, method: "GET", path: "/health/\(round % 3)", extra: [("apns-topic", "t\(round % 2)"), ("x-round", "\(round)")])
        }
        let (answered, failure) = Self.run(&state, all)
        #expect(failure == nil)
        #expect(answered == [1, 5, 9, 13, 17, 21])
        for frame in try nio.read(Self.bytes(&state.forward)) where frame.type == 1 {
            given.append((frame.stream, frame.fields?.first(name: ":path")))
            #expect(frame.fields?.first(name: "x-round") == String((frame.stream - 3) / 4))
        }
        #expect(given.map(\.0) == [3, 7, 11, 15, 19, 23])
        #expect(given.map(\.1) == (0..<6).map { "/health/\($0 % 3)" })
    }

    @Test("a request still open when the read completes goes to NIO, HEADERS then DATA; a later stream NIO is given comes after the held one")
    func heldInOrder() throws {
        var state = State()
        var nio = NIOSide()
        // Stream 1's body has not ended; 3 is not claimed: 1 must reach NIO first.
        Self.run(&state, Self.prefaceBytes + Self.settings + Self.push(1, end: false) + Self.get(3), complete: false)
        var frames = try nio.read(Self.bytes(&state.forward))
        #expect(frames.map(\.stream) == [0, 1, 1, 3])
        #expect(frames.map(\.type) == [4, 1, 0, 1])
        // Stream 5 held at the read's end: handed on.
        Self.run(&state, Self.push(5, end: false))
        frames = try nio.read(Self.bytes(&state.forward))
        #expect(frames.map(\.stream) == [5, 5])
        #expect(frames[0].fields?.first(name: ":path") == "/3/device/\(Self.token)")
        #expect(state.heldStreams == 0)
    }

    @Test("a body past the route's limit, a length that disagrees with the body, an answer with a body or none at all: each stream goes to NIO whole")
    func handedOn() throws {
        var state = State()
        var nio = NIOSide()
        let big = Array(repeating: UInt8(ascii: " "), count: 65)
        var result = Self.run(&state, Self.prefaceBytes + Self.settings + Self.push(1, body: big))
        #expect(result.answered.isEmpty)
        #expect(try nio.read(Self.bytes(&state.forward)).map(\.stream) == [0, 1, 1])
        result = Self.run(&state, Self.push(3, extra: [("content-length", "3")]))
        #expect(result.answered.isEmpty)
        #expect(try nio.read(Self.bytes(&state.forward)).map(\.stream) == [3, 3])
        result = Self.run(&state, Self.push(5), answer: CompleteResponse(status: .badRequest, body: ByteBuffer(string: #"{"reason":"BadDeviceToken"}"#)))
        #expect(result.answered.isEmpty)
        #expect(try nio.read(Self.bytes(&state.forward)).map(\.stream) == [5, 5])
        result = Self.run(&state, Self.push(7), answer: nil)
        #expect(result.answered.isEmpty)
        #expect(try nio.read(Self.bytes(&state.forward)).map(\.stream) == [7, 7])
        #expect(Self.bytes(&state.output).isEmpty)
    }

    @Test("late frames of a stream answered here: WINDOW_UPDATE, PRIORITY and RST_STREAM dropped, DATA a connection error (STREAM_CLOSED) with GOAWAY naming the highest stream")
    func lateFrames() throws {
        var state = State()
        Self.run(&state, Self.prefaceBytes + Self.settings + Self.push(1) + Self.push(3))
        _ = Self.bytes(&state.forward)
        _ = Self.bytes(&state.output)
        let window = HTTP2Wire.frame(type: 8, flags: 0, stream: 1, [0, 0, 0x10, 0])
        let reset = HTTP2Wire.frame(type: 3, flags: 0, stream: 3, [0, 0, 0, 8])
        let priority = HTTP2Wire.frame(type: 2, flags: 0, stream: 3, [0, 0, 0, 0, 16])
        let connectionWindow = HTTP2Wire.frame(type: 8, flags: 0, stream: 0, [0, 0, 0x10, 0])
        #expect(Self.run(&state, window + reset + priority + connectionWindow).failure == nil)
        #expect(Self.bytes(&state.forward) == connectionWindow)
        // Frames of the wrong length on such a stream are refused as NIO would refuse them.
        var short = state
        #expect(Self.run(&short, HTTP2Wire.frame(type: 3, flags: 0, stream: 3, [0, 0, 8])).failure == 0x6)
        // A HEADERS frame opening a stream below the highest: NIO's "stream ID too small".
        var reopened = state
        #expect(Self.run(&reopened, Self.get(1)).failure == 0x1)
        #expect(Self.run(&state, HTTP2Wire.data(stream: 1, [1], endStream: true)).failure == 0x5)
        let goAway = HTTP2Wire.frames(Self.bytes(&state.output))
        #expect(goAway.map(\.type) == [7])
        #expect(goAway.first?.payload == [0, 0, 0, 3, 0, 0, 0, 5])
        // Nothing is read after a connection error.
        #expect(Self.run(&state, Self.push(5)).answered.isEmpty)
        #expect(Self.bytes(&state.forward).isEmpty)
    }

    @Test("CONTINUATION and padding: a request split and padded is answered; a frame between a block's frames, too many CONTINUATIONs, padding past the frame and an undecodable block are connection errors")
    func continuationAndPadding() throws {
        let whole = HTTP2Wire.headers(stream: 1, path: "/3/device/\(Self.token)", extra: [("apns-topic", "t")], endStream: false)
        let block = Array(whole[9...])
        let split = HTTP2Wire.frame(type: 1, flags: 0x8, stream: 1, [3] + block.prefix(10) + [0, 0, 0])
            + HTTP2Wire.frame(type: 9, flags: 0, stream: 1, Array(block[10..<20]))
            + HTTP2Wire.frame(type: 9, flags: 0x4, stream: 1, Array(block[20...]))
            + HTTP2Wire.frame(type: 0, flags: 0x9, stream: 1, [2] + Self.alert + [0, 0])
        var state = State()
        let result = Self.run(&state, Self.prefaceBytes + Self.settings + split)
        #expect(result.failure == nil)
        #expect(result.answered == [1])

        func fails(_ bytes: [UInt8]) -> UInt32? {
            var state = State()
            return Self.run(&state, Self.prefaceBytes + Self.settings + bytes).failure
        }
        let open = HTTP2Wire.frame(type: 1, flags: 0, stream: 1, Array(block.prefix(10)))
        #expect(fails(open + HTTP2Wire.ping(1)) == 0x1)
        #expect(fails(open + HTTP2Wire.frame(type: 9, flags: 0x4, stream: 3, Array(block[10...]))) == 0x1)
        #expect(fails(HTTP2Wire.frame(type: 9, flags: 0x4, stream: 1, block)) == 0x1)
        #expect(fails(open + Array(repeating: HTTP2Wire.frame(type: 9, flags: 0, stream: 1, [0x80]), count: 6).flatMap { $0 }) == 0xB)
        #expect(fails(HTTP2Wire.frame(type: 1, flags: 0xC, stream: 1, [200] + block)) == 0x1)
        #expect(fails(HTTP2Wire.frame(type: 1, flags: 0x5, stream: 1, [0xFF, 0xFF, 0xFF, 0x7F])) == 0x9)
        #expect(fails(HTTP2Wire.frame(type: 0, flags: 0, stream: 1, Array(repeating: 0, count: 16_385))) == 0x6)
        #expect(fails(HTTP2Wire.frame(type: 1, flags: 0x5, stream: 0, block)) == 0x1)
    }

    @Test("a client that lowers its HPACK table's size, at once or after raising it, and a stopping server: no request is answered here from then on")
    func notClaiming() throws {
        var state = State()
        let shrink = HTTP2Wire.frame(type: 4, flags: 0, stream: 0, [0, 1, 0, 0, 0, 0])
        #expect(Self.run(&state, Self.prefaceBytes + shrink + Self.push(1)).answered.isEmpty)
        // Raised to 8,192, then back to 4,096: NIO's encoder owes the client a size update.
        var raised = State()
        let to8192 = HTTP2Wire.frame(type: 4, flags: 0, stream: 0, [0, 1, 0, 0, 0x20, 0])
        let to4096 = HTTP2Wire.frame(type: 4, flags: 0, stream: 0, [0, 1, 0, 0, 0x10, 0])
        #expect(Self.run(&raised, Self.prefaceBytes + to8192 + Self.push(1)).answered == [1])
        #expect(Self.run(&raised, to4096 + Self.push(3)).answered.isEmpty)
        var stopping = State()
        stopping.claiming = false
        #expect(Self.run(&stopping, Self.prefaceBytes + Self.settings + Self.push(1)).answered.isEmpty)
        var nio = NIOSide()
        #expect(try nio.read(Self.bytes(&stopping.forward)).map(\.stream) == [0, 1, 1])
    }

    @Test("request bytes consumed here are given back to the connection's window once 16 KiB have gathered")
    func refund() throws {
        var state = State()
        var all = Self.prefaceBytes + Self.settings
        // 300 pushes of 21 DATA bytes: 6,300, under the threshold.
        for index in 0..<300 { all += Self.push(UInt32(1 + 2 * index)) }
        Self.run(&state, all)
        #expect(!HTTP2Wire.frames(Self.bytes(&state.output)).contains { $0.type == 8 })
        all = []
        for index in 300..<900 { all += Self.push(UInt32(1 + 2 * index)) }
        Self.run(&state, all)
        let updates = HTTP2Wire.frames(Self.bytes(&state.output)).filter { $0.type == 8 }
        #expect(updates.count == 1)
        #expect(updates.first?.stream == 0)
        #expect(updates.first?.payload == [0, 0, 0x49, 0xD4])  // 900 × 21 = 18,900
    }

    @Test("bytes split anywhere give the same answers and the same bytes for NIO as bytes read whole")
    func splitAnywhere() throws {
        let all = Self.prefaceBytes + Self.settings + Self.push(1) + Self.get(3) + Self.push(5) + HTTP2Wire.ping(7) + Self.push(7)
        var whole = State()
        let expected = Self.run(&whole, all).answered
        let expectedForward = Self.bytes(&whole.forward)
        for cut in 1..<all.count {
            var state = State()
            // Each part is its own read, as the socket would give it.
            let answered = Self.run(&state, Array(all[..<cut])).answered + Self.run(&state, Array(all[cut...])).answered
            let forward = Self.bytes(&state.forward)
            var nio = NIOSide()
            let given = try nio.read(forward).filter { $0.type == 1 }.map(\.stream)
            // A read that ends inside a request hands its stream on: each stream once, one way or the other.
            #expect(Set(answered).isDisjoint(with: given), "cut at \(cut)")
            #expect((answered + given).sorted() == [1, 3, 5, 7], "cut at \(cut)")
            #expect(given == given.sorted(), "cut at \(cut)")
            if answered == expected { #expect(forward == expectedForward, "cut at \(cut)") }
        }
        #expect(expected == [1, 5, 7])
    }

    @Test("bytes that are not HTTP/2 go on to NIO's handler as they came, to be refused there")
    func notHTTP2() {
        var state = State()
        let request = Array("GET / HTTP/1.1\r\nhost: x\r\n\r\n".utf8)
        #expect(Self.run(&state, request).failure == nil)
        #expect(Self.bytes(&state.forward) == request)
    }

    @Test("idle: due one timeout after the last activity, never while NIO has a stream open, and activity pushes it back")
    func idle() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var idle = HTTP2IdleTimeout(timeout: .seconds(1), now: start)
        #expect(idle.check(now: start + .milliseconds(500), openStreams: 0) == start + .seconds(1))
        #expect(idle.check(now: start + .seconds(1), openStreams: 0) == nil)
        #expect(idle.check(now: start + .seconds(5), openStreams: 1) == start + .seconds(6))
        idle.active(now: start + .milliseconds(900))
        #expect(idle.check(now: start + .seconds(1), openStreams: 0) == start + .milliseconds(1900))
        // A clock read earlier than the last activity does not move it back.
        idle.active(now: start + .milliseconds(100))
        #expect(idle.check(now: start + .milliseconds(1899), openStreams: 0) == start + .milliseconds(1900))
        #expect(idle.check(now: start + .milliseconds(1900), openStreams: 0) == nil)
    }

    @Test("no more claimed streams held at once than NIO's concurrent-stream limit; the rest go to NIO, in order")
    func heldCap() throws {
        var state = State()
        var all = Self.prefaceBytes + Self.settings
        for index in 0..<150 { all += Self.push(UInt32(1 + 2 * index), end: false) }
        Self.run(&state, all, complete: false)
        #expect(state.heldStreams <= State.maxHeld)
        state.readComplete()
        #expect(state.heldStreams == 0)
        var nio = NIOSide()
        let given = try nio.read(Self.bytes(&state.forward)).filter { $0.type == 1 }.map(\.stream)
        let expected: [UInt32] = (0..<150).map { (index: Int) -> UInt32 in UInt32(1 + 2 * index) }
        #expect(given == expected)
    }
}
