package import NIOCore
package import NIOWebSocket

/// Reads the frames a WebSocket server sends a client (RFC 6455 §5.2) from the socket's bytes,
/// and builds the few frames a client sends back.
///
/// A device's own socket uses this in place of NIO's frame decoder and encoder: those are two
/// more handlers, a decoding buffer ring and their contexts on every device's pipeline, paid by
/// every idle device. Here bytes are held only while a frame is incomplete.
package struct WebSocketFrameReader {
    package struct Frame: Equatable {
        package var fin: Bool
        package var opcode: WebSocketOpcode
        package var payload: ByteBuffer
    }

    package enum Step: Equatable {
        case frame(Frame)
        case needMore
        /// Not what a server may send; the connection is to be closed.
        case violation(String)
    }

    private let maxPayload: Int
    /// Bytes of a frame not yet complete, or of frames not yet read.
    private var pending: ByteBuffer?

    package init(maxPayload: Int) {
        self.maxPayload = maxPayload
    }

    /// Bytes waiting for the rest of their frame.
    package var buffered: Int { pending?.readableBytes ?? 0 }

    package mutating func append(_ bytes: ByteBuffer) {
        guard bytes.readableBytes > 0 else { return }
        if pending == nil {
            pending = bytes
        } else {
            var bytes = bytes
            pending!.writeBuffer(&bytes)
        }
    }

    /// The next whole frame, if the bytes hold one.
    package mutating func next() -> Step {
        guard var bytes = pending, let first = bytes.readInteger(as: UInt8.self), let second = bytes.readInteger(as: UInt8.self) else {
            return .needMore
        }
        guard first & 0x70 == 0 else { return .violation("reserved bits set") }
        // 0–2 and 8–10 are defined; without an extension the others are reserved.
        guard (0b0111_0000_0111 as UInt16) >> (first & 0x0F) & 1 == 1, let opcode = WebSocketOpcode(encodedWebSocketOpcode: first & 0x0F) else {
            return .violation("reserved opcode \(first & 0x0F)")
        }
        guard second & 0x80 == 0 else { return .violation("masked frame from the server") }
        let fin = first & 0x80 != 0
        var length = UInt64(second & 0x7F)
        if length == 126 {
            guard let extended = bytes.readInteger(as: UInt16.self) else { return .needMore }
            length = UInt64(extended)
        } else if length == 127 {
            guard let extended = bytes.readInteger(as: UInt64.self) else { return .needMore }
            length = extended
        }
        if opcode.isControlOpcode, !fin || length > 125 { return .violation("control frame fragmented or over 125 bytes") }
        guard length <= UInt64(maxPayload) else { return .violation("frame of \(length) bytes") }
        guard let payload = bytes.readSlice(length: Int(length)) else { return .needMore }
        // Dropped once read, so an idle socket holds no bytes.
        pending = bytes.readableBytes > 0 ? bytes : nil
        return .frame(Frame(fin: fin, opcode: opcode, payload: payload))
    }

    /// A client's control frame (ping, pong, close), masked as RFC 6455 requires of clients;
    /// a payload over 125 bytes is cut there.
    package static func controlFrame(_ opcode: WebSocketOpcode, payload: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer {
        var payload = payload.getSlice(at: payload.readerIndex, length: min(125, payload.readableBytes)) ?? ByteBuffer()
        let mask = WebSocketMaskingKey.random()
        var frame = allocator.buffer(capacity: 6 + payload.readableBytes)
        frame.writeInteger(0x80 | UInt8(webSocketOpcode: opcode))
        frame.writeInteger(0x80 | UInt8(payload.readableBytes))
        frame.writeBytes(mask)
        payload.webSocketMask(mask)
        frame.writeBuffer(&payload)
        return frame
    }
}
