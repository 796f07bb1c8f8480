import NIOCore
import NIOWebSocket

/// Where a gateway connection writes its pushes: just below NIO's WebSocket frame encoder, as
/// whole frames already in bytes (head and payload in one buffer).
///
/// Why not `channel.write(WebSocketFrame)`: that write starts at the pipeline's tail and passes
/// every handler of the upgraded connection, and the encoder then writes the frame's head and
/// payload as two buffers (a `writev`). Per delivered push that was ~8% of the push service's
/// CPU (docs/performance-push.md). Frames the WebSocket handler writes (pings, pongs, the
/// close) still go through the encoder and then through here, in the order they were written.
final class GatewayFrameSink: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Adds a sink below the channel's frame encoder; nil when the channel has no encoder (the
    /// frames then go through the pipeline as before). On the channel's event loop.
    static func install(on channel: any Channel) -> GatewayFrameSink? {
        let pipeline = channel.pipeline.syncOperations
        guard let encoder = try? pipeline.handler(type: WebSocketFrameEncoder.self) else { return nil }
        let sink = GatewayFrameSink()
        guard (try? pipeline.addHandler(sink, position: .before(encoder))) != nil, sink.context != nil else { return nil }
        return sink
    }

    /// Writes one encoded frame (``textFrame(_:allocator:)``); false once the sink has left the
    /// pipeline.
    func write(_ frame: ByteBuffer) -> Bool {
        guard let context else { return false }
        context.write(wrapOutboundOut(frame), promise: nil)
        return true
    }

    /// False once the sink has left the pipeline.
    func flush() -> Bool {
        guard let context else { return false }
        context.flush()
        return true
    }

    /// A final, unmasked text frame (RFC 6455 §5.2), as a server writes one: its head and the
    /// text's UTF-8 (a push's frame is written as ``JSONBytes``) in one buffer.
    static func textFrame(_ payload: [UInt8], allocator: ByteBufferAllocator) -> ByteBuffer {
        let length = payload.count
        var buffer = allocator.buffer(capacity: length + 10)
        buffer.writeInteger(UInt8(0x81))
        if length < 126 {
            buffer.writeInteger(UInt8(length))
        } else if length <= Int(UInt16.max) {
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(length))
        } else {
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(length))
        }
        buffer.writeBytes(payload)
        return buffer
    }
}
