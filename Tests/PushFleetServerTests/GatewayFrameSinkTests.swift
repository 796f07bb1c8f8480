import NIOCore
import NIOEmbedded
import NIOWebSocket
@testable import PushFleetMockPush
import Testing

/// The gateway's frames written as bytes below NIO's encoder: NIO's decoder reads them as the
/// frames the encoder would have written, and the handler's own frames keep their place.
@Suite("Gateway frame sink")
struct GatewayFrameSinkTests {
    /// Frames NIO's decoder reads from `bytes`.
    private static func decoded(_ bytes: ByteBuffer) throws -> [WebSocketFrame] {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)))
        try channel.writeInbound(bytes)
        var frames: [WebSocketFrame] = []
        while let frame = try channel.readInbound(as: WebSocketFrame.self) { frames.append(frame) }
        _ = try channel.finish()
        return frames
    }

    @Test("each length form (7-bit, 16-bit, 64-bit) decodes to one final, unmasked text frame of the same text", arguments: [0, 1, 125, 126, 127, 65_535, 65_536, 70_000])
    func lengths(_ length: Int) throws {
        let text = String(repeating: "é", count: length / 2) + String(repeating: "a", count: length % 2)
        let frames = try Self.decoded(GatewayFrameSink.textFrame(Array(text.utf8), allocator: ByteBufferAllocator()))
        #expect(frames.count == 1)
        let frame = try #require(frames.first)
        #expect(frame.fin && frame.opcode == .text && frame.maskKey == nil)
        #expect(frame.unmaskedData.readableBytes == length)
        #expect(String(buffer: frame.unmaskedData) == text)
    }

    @Test("installed below the encoder, its frames and the encoder's go out in the order written; without an encoder it is not installed")
    func order() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(WebSocketFrameEncoder())
        let sink = try #require(GatewayFrameSink.install(on: channel))
        #expect(sink.write(GatewayFrameSink.textFrame(Array("one".utf8), allocator: channel.allocator)))
        try channel.writeOutbound(WebSocketFrame(fin: true, opcode: .ping, data: channel.allocator.buffer(string: "p")))
        #expect(sink.write(GatewayFrameSink.textFrame(Array("two".utf8), allocator: channel.allocator)))
        #expect(sink.flush())
        var written = channel.allocator.buffer(capacity: 64)
        while var part = try channel.readOutbound(as: ByteBuffer.self) { written.writeBuffer(&part) }
        let frames = try Self.decoded(written)
        let seen = frames.map { "\($0.opcode):\(String(buffer: $0.unmaskedData))" }
        #expect(seen == ["\(WebSocketOpcode.text):one", "\(WebSocketOpcode.ping):p", "\(WebSocketOpcode.text):two"])
        try channel.pipeline.syncOperations.removeHandler(sink).wait()
        #expect(!sink.write(GatewayFrameSink.textFrame(Array("three".utf8), allocator: channel.allocator)))
        #expect(!sink.flush())
        _ = try channel.finish()

        #expect(GatewayFrameSink.install(on: EmbeddedChannel()) == nil)
    }
}
