import HTTPTypes
import NIOHPACK
import NIOEmbedded
import NIOCore
import NIOHTTP2
@testable import PushFleetServerSupport
import Testing

/// HTTP/2 streams answered at the connection's frames: the rules without a channel. Items are
/// strings naming the frame or event the handler would replay.
@Suite("HTTP/2 streams answered at the frames")
struct HTTP2FrameRoutesStateTests {
    typealias State = HTTP2FrameRoutesState<String, String>
    static let head = HTTPRequest(method: .post, scheme: "http", authority: "x", path: "/3/device/ab")

    static func claim() -> (String, HTTPRequest, Int)? { ("apns", head, 8) }
    static func decline() -> (String, HTTPRequest, Int)? { nil }
    static func valid(_ trailers: Bool) -> Bool { true }

    static func answered(_ action: State.Inbound) -> (HTTP2StreamID, String, ByteBuffer)? {
        guard case .answer(let id, let route, _, let body) = action else { return nil }
        return (id, route, body)
    }

    static func replayed(_ action: State.Inbound) -> [String]? {
        guard case .replay(let items) = action else { return nil }
        return items
    }

    static func kind(_ action: State.Inbound) -> String {
        switch action {
        case .forward: "forward"
        case .hold: "hold"
        case .drop: "drop"
        case .answer: "answer"
        case .replay: "replay"
        case .reset: "reset"
        }
    }

    @Test("a malformed first block resets its stream, which is never claimed and whose frames and events are dropped until it closes; malformed trailers reset a held stream or one the multiplexer has")
    func malformedBlocks() throws {
        var state = State()
        var claimed = false
        let invalid = { (_: Bool) in false }
        #expect(Self.kind(state.headers(1, endStream: false, item: "H1", isValid: invalid) { claimed = true; return Self.claim() }) == "reset")
        #expect(!claimed)
        #expect(Self.kind(state.event(1, item: "created1")) == "drop")
        #expect(Self.kind(state.data(1, ByteBuffer(string: "{}"), endStream: true, item: "D1")) == "drop")
        #expect(Self.kind(state.headers(1, endStream: true, item: "T1", isValid: Self.valid, claim: Self.claim)) == "drop")
        #expect(Self.kind(state.closed(1)) == "drop")
        // Once closed it is forgotten: its id's frames are any other stream's again.
        #expect(Self.kind(state.event(1, item: "late1")) == "forward")
        // Held, then malformed trailers: reset, and its held items are never replayed.
        #expect(Self.kind(state.headers(3, endStream: false, item: "H3", isValid: Self.valid, claim: Self.claim)) == "hold")
        #expect(Self.kind(state.headers(3, endStream: true, item: "T3", isValid: { $0 ? false : true }, claim: Self.claim)) == "reset")
        #expect(state.readComplete().isEmpty)
        #expect(Self.kind(state.closed(3)) == "drop")
        // The multiplexer's stream: its malformed trailers reset it, its events still go on.
        #expect(Self.kind(state.headers(5, endStream: false, item: "H5", isValid: Self.valid, claim: Self.decline)) == "forward")
        #expect(Self.kind(state.headers(5, endStream: true, item: "T5", isValid: { !$0 }, claim: Self.claim)) == "reset")
        #expect(Self.kind(state.closed(5)) == "forward")
        #expect(state.heldStreams == 0)
    }

    @Test("a claimed request whose HEADERS and DATA come in one read is answered; its later frames and events are dropped")
    func answeredInOneRead() throws {
        var state = State()
        #expect(Self.kind(state.headers(1, endStream: false, item: "H1", isValid: Self.valid, claim: Self.claim)) == "hold")
        #expect(Self.kind(state.event(1, item: "created1")) == "hold")
        #expect(Self.kind(state.data(1, ByteBuffer(string: "{\"a\":"), endStream: false, item: "D1")) == "hold")
        let answer = try #require(Self.answered(state.data(1, ByteBuffer(string: "1}"), endStream: true, item: "D1'")))
        #expect(answer.0 == 1 && answer.1 == "apns" && answer.2 == ByteBuffer(string: "{\"a\":1}"))
        state.answered(1)
        #expect(state.readComplete().isEmpty)
        #expect(Self.kind(state.otherFrame(1, isReset: false)) == "drop")
        #expect(Self.kind(state.event(1, item: "window1")) == "drop")
        #expect(Self.kind(state.closed(1)) == "drop")
        #expect(state.heldStreams == 0)
        // Closed and forgotten: anything later about it is the multiplexer's to judge.
        #expect(Self.kind(state.closed(1)) == "forward")
    }

    @Test("a request without a body is answered at its HEADERS")
    func noBody() throws {
        var state = State()
        let answer = try #require(Self.answered(state.headers(3, endStream: true, item: "H3", isValid: Self.valid, claim: Self.claim)))
        #expect(answer.0 == 3 && answer.2.readableBytes == 0)
    }

    @Test("a declined stream and everything about it goes on, trailers included; claim is asked once per stream")
    func declined() {
        var state = State()
        var asked = 0
        let claim: () -> (String, HTTPRequest, Int)? = { asked += 1; return nil }
        #expect(Self.kind(state.headers(1, endStream: false, item: "H1", isValid: Self.valid, claim: claim)) == "forward")
        #expect(Self.kind(state.event(1, item: "created1")) == "forward")
        #expect(Self.kind(state.data(1, ByteBuffer(string: "x"), endStream: false, item: "D1")) == "forward")
        #expect(Self.kind(state.headers(1, endStream: true, item: "T1", isValid: Self.valid, claim: claim)) == "forward")
        #expect(Self.kind(state.otherFrame(1, isReset: true)) == "forward")
        #expect(Self.kind(state.closed(1)) == "forward")
        #expect(asked == 1)
        #expect(state.readComplete().isEmpty)
    }

    @Test("a request still open when the read completes is handed over: its frames and events replayed in order")
    func openAtReadComplete() {
        var state = State()
        _ = state.headers(1, endStream: false, item: "H1", isValid: Self.valid, claim: Self.claim)
        _ = state.event(1, item: "created1")
        _ = state.headers(3, endStream: false, item: "H3", isValid: Self.valid, claim: Self.claim)
        _ = state.data(1, ByteBuffer(string: "ab"), endStream: false, item: "D1")
        _ = state.event(3, item: "created3")
        #expect(state.readComplete() == ["H1", "created1", "D1", "H3", "created3"])
        // From now on, streams 1 and 3 are any others.
        #expect(Self.kind(state.data(1, ByteBuffer(string: "c"), endStream: true, item: "D1'")) == "forward")
        #expect(Self.kind(state.closed(3)) == "forward")
        #expect(state.heldStreams == 0)
    }

    @Test("a body past its limit is handed over at once, the frame that passed it included")
    func pastTheLimit() throws {
        var state = State()
        _ = state.headers(5, endStream: false, item: "H5", isValid: Self.valid, claim: Self.claim)
        #expect(Self.kind(state.data(5, ByteBuffer(string: "12345"), endStream: false, item: "D5a")) == "hold")
        let items = try #require(Self.replayed(state.data(5, ByteBuffer(string: "6789"), endStream: true, item: "D5b")))
        #expect(items == ["H5", "D5a", "D5b"])
        #expect(state.heldStreams == 0)
        // Exactly the limit is taken.
        _ = state.headers(7, endStream: false, item: "H7", isValid: Self.valid, claim: Self.claim)
        #expect(Self.answered(state.data(7, ByteBuffer(string: "12345678"), endStream: true, item: "D7")) != nil)
    }

    @Test("an answer that needs asynchronous work hands the stream over with all it held")
    func handOver() throws {
        var state = State()
        _ = state.headers(1, endStream: false, item: "H1", isValid: Self.valid, claim: Self.claim)
        _ = state.event(1, item: "created1")
        #expect(Self.answered(state.data(1, ByteBuffer(string: "{}"), endStream: true, item: "D1")) != nil)
        #expect(state.handOver(1) == ["H1", "created1", "D1"])
        #expect(state.readComplete().isEmpty)
        #expect(Self.kind(state.closed(1)) == "forward")
    }

    @Test("trailers end a held request; a reset forgets it")
    func trailersAndReset() {
        var state = State()
        _ = state.headers(1, endStream: false, item: "H1", isValid: Self.valid, claim: Self.claim)
        _ = state.data(1, ByteBuffer(string: "{}"), endStream: false, item: "D1")
        #expect(Self.answered(state.headers(1, endStream: true, item: "T1", isValid: Self.valid, claim: Self.decline)) != nil)
        state.answered(1)
        _ = state.headers(3, endStream: false, item: "H3", isValid: Self.valid, claim: Self.claim)
        #expect(Self.kind(state.otherFrame(3, isReset: true)) == "drop")
        // Stream 1 waits for its close; stream 3 is gone and nothing is replayed.
        #expect(state.heldStreams == 1)
        #expect(state.readComplete().isEmpty)
    }
}

/// The handler on a channel without a socket: which frames it answers itself and which reach the
/// multiplexer's place after it.
@Suite("HTTP/2 frame routes on a channel")
struct HTTP2FrameRoutesHandlerTests {
    /// Claims `/fast` with an 8-byte limit; answers 200 "ok", or hands over when asked to wait.
    struct Fast: EventLoopResponder {
        func route(for head: HTTPRequest) -> EventLoopRoute? { head.path == "/fast" ? EventLoopRoute(kind: 1, parameter: "", bodyLimit: 8) : nil }
        func respond(_ route: EventLoopRoute, head: HTTPRequest, body: ByteBuffer?, channel: any Channel) -> CompleteResponse? {
            head.headerFields[HTTPField.Name("x-wait")!] != nil ? nil : CompleteResponse(status: .ok, headers: [.contentType: "text/plain"], body: ByteBuffer(string: "ok"))
        }
    }

    /// What reached the place of the multiplexer.
    final class Catcher: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTP2Frame
        var seen: [String] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.payload {
            case .headers: seen.append("H\(Int(frame.streamID))")
            case .data: seen.append("D\(Int(frame.streamID))")
            default: seen.append("other\(Int(frame.streamID))")
            }
        }
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let created = event as? NIOHTTP2StreamCreatedEvent { seen.append("created\(Int(created.streamID))") }
            if let closed = event as? StreamClosedEvent { seen.append("closed\(Int(closed.streamID))") }
        }
    }

    static func headers(_ id: HTTP2StreamID, _ path: String, wait: Bool = false, end: Bool = false) -> HTTP2Frame {
        var block: HPACKHeaders = [":method": "POST", ":scheme": "http", ":path": path, ":authority": "x"]
        if wait { block.add(name: "x-wait", value: "1") }
        return HTTP2Frame(streamID: id, payload: .headers(.init(headers: block, endStream: end)))
    }

    static func data(_ id: HTTP2StreamID, _ text: String, end: Bool = true) -> HTTP2Frame {
        HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(ByteBuffer(string: text)), endStream: end)))
    }

    static func created(_ id: HTTP2StreamID) -> NIOHTTP2StreamCreatedEvent {
        NIOHTTP2StreamCreatedEvent(streamID: id, localInitialWindowSize: 65535, remoteInitialWindowSize: 65535)
    }

    @Test("claimed streams are answered in HEADERS and one DATA ending the stream, flushed at the read's end; the rest reach the multiplexer in order")
    func answersAndForwards() throws {
        let channel = EmbeddedChannel()
        let catcher = Catcher()
        try channel.pipeline.syncOperations.addHandler(Fast().frameRoutes(link: nil))
        try channel.pipeline.syncOperations.addHandler(catcher)
        // One frame at a time, as the HTTP/2 handler passes them on; the read completes when told.
        func read(_ frame: HTTP2Frame) { channel.pipeline.fireChannelRead(frame) }
        // One read: a fast push, a router request, a push that must wait, a push still open.
        read(Self.headers(1, "/fast"))
        channel.pipeline.fireUserInboundEventTriggered(Self.created(1))
        read(Self.data(1, "{}"))
        read(Self.headers(3, "/slow", end: true))
        channel.pipeline.fireUserInboundEventTriggered(Self.created(3))
        read(Self.headers(5, "/fast", wait: true))
        channel.pipeline.fireUserInboundEventTriggered(Self.created(5))
        read(Self.data(5, "{}"))
        read(Self.headers(7, "/fast"))
        channel.pipeline.fireUserInboundEventTriggered(Self.created(7))
        #expect(catcher.seen == ["H3", "created3", "H5", "created5", "D5"])
        // Nothing is written out before the read completes.
        #expect(try channel.readOutbound(as: HTTP2Frame.self) == nil)
        channel.pipeline.fireChannelReadComplete()
        // Stream 7 was still open: handed over, in order.
        #expect(catcher.seen == ["H3", "created3", "H5", "created5", "D5", "H7", "created7"])
        let head = try #require(try channel.readOutbound(as: HTTP2Frame.self))
        let body = try #require(try channel.readOutbound(as: HTTP2Frame.self))
        #expect(try channel.readOutbound(as: HTTP2Frame.self) == nil)
        #expect(head.streamID == 1 && body.streamID == 1)
        guard case .headers(let fields) = head.payload, case .data(let data) = body.payload else {
            Issue.record("\(head) \(body)")
            return
        }
        #expect(!fields.endStream && data.endStream)
        #expect(fields.headers.first(name: ":status") == "200")
        #expect(fields.headers.first(name: "content-length") == "2")
        #expect(fields.headers.first(name: "content-type") == "text/plain")
        #expect(data.data == .byteBuffer(ByteBuffer(string: "ok")))
        // The answered stream's close is its own; the handed-over stream's reaches the multiplexer.
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: 1, reason: nil))
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: 7, reason: nil))
        read(Self.data(7, "{}"))
        #expect(catcher.seen.suffix(2) == ["closed7", "D7"])
        _ = try channel.finish()
    }
}


@Suite("An HTTP/2 connection's end")
struct HTTP2ConnectionEndStateTests {
    @Test("an ending connection closes at once with no stream open, else when its last stream closes")
    func closes() {
        var idle = HTTP2ConnectionEndState()
        let idleCloses = idle.end(inputClosed: false)
        #expect(idleCloses)
        var busy = HTTP2ConnectionEndState()
        busy.streamOpened(1)
        busy.streamOpened(3)
        let steps = [busy.streamClosed(1), busy.end(inputClosed: false), busy.streamClosed(3)]
        #expect(steps == [false, false, true])
        // Streams come and go on a connection that is not ending: it stays.
        var open = HTTP2ConnectionEndState()
        open.streamOpened(1)
        let later = [open.streamClosed(1), open.streamClosed(1), open.end(inputClosed: false)]
        #expect(later == [false, false, true])
    }

    @Test("once the client's input has ended, streams being answered are waited for and unfinished requests are not")
    func inputEnded() {
        // A request never finished (HEADERS without END_STREAM, then the client's end): close.
        var unfinished = HTTP2ConnectionEndState()
        unfinished.streamOpened(1)
        let closesAtOnce = unfinished.end(inputClosed: true)
        #expect(closesAtOnce)
        // A whole request still being answered: close when its stream closes.
        var answering = HTTP2ConnectionEndState()
        answering.streamOpened(1)
        answering.clientEnded(1)
        answering.streamOpened(3)
        let steps = [answering.end(inputClosed: true), answering.streamClosed(1)]
        #expect(steps == [false, true])
        // A stopping server waits for every open stream, finished or not.
        var stopping = HTTP2ConnectionEndState()
        stopping.streamOpened(1)
        let stopsAtOnce = stopping.end(inputClosed: false)
        #expect(!stopsAtOnce)
    }
}

@Suite("An HTTP/2 header block read as a request head")
struct HTTPRequestHTTP2Tests {
    @Test("a well-formed block gives its head; a hostile one gives nil, so the stream channels judge it")
    func hostileBlocks() {
        let good: HPACKHeaders = [":method": "POST", ":scheme": "https", ":path": "/3/device/ab", ":authority": "x", "apns-topic": "t"]
        let head = HTTPRequest(http2: good)
        #expect(head?.method == .post && head?.path == "/3/device/ab" && head?.authority == "x")
        #expect(head?.headerFields[HTTPField.Name("apns-topic")!] == "t")
        let hostile: [HPACKHeaders] = [
            [":method": "POST", ":method": "GET", ":path": "/"],  // a repeated pseudo-header
            [":method": "POST", ":path": "/", ":path": "/other"],
            [":method": "POST", ":protocol": "websocket", ":path": "/"],  // a pseudo-header not read here
            [":path": "/", "apns-topic": "t"],  // no method
            [":method": "P O S T", ":path": "/"],  // a method HTTP does not allow
            [":method": "POST", ":path": "/", "bad name": "v"],  // a field name HTTP does not allow
            [":method": "POST", "apns-topic": "t", ":path": "/"],  // a pseudo-header after a field
            [:],
        ]
        for block in hostile {
            #expect(HTTPRequest(http2: block) == nil, "\(block)")
        }
    }
}
