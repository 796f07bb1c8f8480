import NIOCore
import NIOEmbedded
import NIOWebSocket
import PushFleetClients
import Testing

/// The device socket's frame reader, without a socket: frames as a server writes them (NIO's own
/// encoder makes the reference bytes), cut at every byte, and what no server may send.
@Suite("WebSocket frame reader")
struct WebSocketFrameReaderTests {
    /// A frame's bytes as NIO's encoder writes them: the reference for what a server sends.
    static func encoded(_ frame: WebSocketFrame) throws -> ByteBuffer {
        let channel = EmbeddedChannel(handler: WebSocketFrameEncoder())
        try channel.writeOutbound(frame)
        var bytes = ByteBuffer()
        while var part = try channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&part) }
        _ = try channel.finish()
        return bytes
    }

    static func frames(in bytes: ByteBuffer, cutEvery step: Int, maxPayload: Int = 1 << 20) -> ([WebSocketFrameReader.Frame], String?) {
        var reader = WebSocketFrameReader(maxPayload: maxPayload)
        var frames: [WebSocketFrameReader.Frame] = []
        var offset = bytes.readerIndex
        while offset < bytes.writerIndex {
            let length = min(step, bytes.writerIndex - offset)
            reader.append(bytes.getSlice(at: offset, length: length)!)
            offset += length
            loop: while true {
                switch reader.next() {
                case .frame(let frame): frames.append(frame)
                case .needMore: break loop
                case .violation(let why): return (frames, why)
                }
            }
        }
        return (frames, nil)
    }

    @Test("frames of 7-, 16- and 64-bit lengths arrive whole however the bytes are cut", arguments: [1, 2, 3, 7, 64, 1 << 20])
    func lengths(step: Int) throws {
        let sent: [WebSocketFrame] = [
            WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "short")),
            WebSocketFrame(fin: false, opcode: .text, data: ByteBuffer(string: String(repeating: "m", count: 300))),
            WebSocketFrame(fin: true, opcode: .continuation, data: ByteBuffer(string: String(repeating: "l", count: 70_000))),
            WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer(string: "p")),
            WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer()),
            WebSocketFrame(fin: true, opcode: .binary, data: ByteBuffer(bytes: [0, 1, 2])),
        ]
        var bytes = ByteBuffer()
        for frame in sent {
            var one = try Self.encoded(frame)
            bytes.writeBuffer(&one)
        }
        let (frames, violation) = Self.frames(in: bytes, cutEvery: step)
        #expect(violation == nil)
        #expect(frames.map(\.opcode) == sent.map(\.opcode))
        #expect(frames.map(\.fin) == sent.map(\.fin))
        #expect(frames.map(\.payload) == sent.map(\.data))
    }

    @Test("an idle reader holds no bytes once a frame is read")
    func holdsNothing() throws {
        var reader = WebSocketFrameReader(maxPayload: 1024)
        let bytes = try Self.encoded(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "hello")))
        reader.append(bytes.getSlice(at: 0, length: 3)!)
        #expect(reader.next() == .needMore)
        #expect(reader.buffered == 3)
        reader.append(bytes.getSlice(at: 3, length: bytes.readableBytes - 3)!)
        guard case .frame(let frame) = reader.next() else {
            Issue.record("no frame")
            return
        }
        #expect(String(buffer: frame.payload) == "hello")
        #expect(reader.buffered == 0)
        #expect(reader.next() == .needMore)
    }

    @Test(
        "what no server may send is refused",
        arguments: [
            ("masked", [0x81, 0x85, 1, 2, 3, 4, 0, 0, 0, 0, 0] as [UInt8]),
            ("reserved bit", [0xC1, 0x00]),
            ("reserved data opcode", [0x83, 0x00]),
            ("reserved control opcode", [0x8B, 0x00]),
            ("fragmented ping", [0x09, 0x00]),
            ("long close", [0x88, 0x7E, 0x00, 0x7E] + [UInt8](repeating: 0, count: 126)),
            ("over the limit", [0x81, 0x7F, 0, 0, 0, 0, 0, 0x10, 0, 0]),
            ("length of 2^63", [0x81, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0]),
        ]
    )
    func violations(name: String, bytes: [UInt8]) {
        let (frames, violation) = Self.frames(in: ByteBuffer(bytes: bytes), cutEvery: 1, maxPayload: 1 << 16)
        #expect(frames.isEmpty, "\(name)")
        #expect(violation != nil, "\(name)")
    }

    @Test("a client's control frame is masked and decodes to its payload with NIO's decoder")
    func controlFrames() throws {
        let built = WebSocketFrameReader.controlFrame(WebSocketOpcode.pong, payload: ByteBuffer(string: "abc"), allocator: ByteBufferAllocator())
        #expect(built.getInteger(at: 1, as: UInt8.self)! & 0x80 != 0, "masked")
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder()))
        try channel.writeInbound(built)
        let frame = try #require(try channel.readInbound(as: WebSocketFrame.self))
        #expect(frame.opcode == .pong)
        #expect(frame.fin)
        #expect(String(buffer: frame.unmaskedData) == "abc")
        let long = WebSocketFrameReader.controlFrame(.ping, payload: ByteBuffer(repeating: 7, count: 300), allocator: ByteBufferAllocator())
        try channel.writeInbound(long)
        #expect(try channel.readInbound(as: WebSocketFrame.self)?.length == 125, "a control frame's payload is cut at 125 bytes")
        _ = try channel.finish()
    }
}

@Suite("WebSocket upgrade")
struct WebSocketUpgradeTests {
    @Test("the accept value the socket expects is RFC 6455's for its example key")
    func acceptValue() {
        #expect(GatewayUpgrader.accept(for: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }
}
