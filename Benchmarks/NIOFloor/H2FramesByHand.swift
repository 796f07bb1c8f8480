import NIOCore
import NIOHPACK

/// h2c read and written frame by frame on the connection's bytes, without NIO's HTTP/2 handler:
/// the frame headers read here, each request's header block decoded by NIO's HPACK decoder (as any
/// server must), "200, empty body" written as one constant HEADERS frame. What an HTTP/2 server
/// of the push service's own could cost beside `NIOHTTP2Handler` (docs/performance-servers.md).
/// A measurement only: no CONTINUATION, no stream states, no limits; a frame it cannot read closes
/// the connection.
final class H2FramesByHand: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// `:status: 200` (static index 8) and `content-length: 0` (name index 28, not indexed).
    private static let answerBlock: [UInt8] = [0x88, 0x0F, 0x0D, 0x01, 0x30]

    private var pending: ByteBuffer?
    private var prefaceSeen = false
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    private var unacknowledged = 0

    func channelActive(context: ChannelHandlerContext) {
        var settings = context.channel.allocator.buffer(capacity: 9)
        Self.frameHeader(&settings, length: 0, type: 0x4, flags: 0, stream: 0)
        context.writeAndFlush(NIOAny(settings), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if var held = pending {
            held.writeBuffer(&bytes)
            bytes = held
        }
        var out = context.channel.allocator.buffer(capacity: 256)
        if !prefaceSeen {
            guard bytes.readableBytes >= Self.preface.count else {
                pending = bytes
                return
            }
            guard bytes.readBytes(length: Self.preface.count) == Self.preface else { return context.close(promise: nil) }
            prefaceSeen = true
        }
        while bytes.readableBytes >= 9 {
            let start = bytes.readerIndex
            let length = Int(bytes.getInteger(at: start, as: UInt32.self)! >> 8)
            guard bytes.readableBytes >= 9 + length else { break }
            let type = bytes.getInteger(at: start + 3, as: UInt8.self)!
            let flags = bytes.getInteger(at: start + 4, as: UInt8.self)!
            let stream = bytes.getInteger(at: start + 5, as: UInt32.self)! & 0x7FFF_FFFF
            bytes.moveReaderIndex(forwardBy: 9)
            var payload = bytes.readSlice(length: length)!
            guard handle(type: type, flags: flags, stream: stream, payload: &payload, out: &out) else { return context.close(promise: nil) }
        }
        pending = bytes.readableBytes > 0 ? bytes : nil
        if out.readableBytes > 0 { context.write(NIOAny(out), promise: nil) }
    }

    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }

    private func handle(type: UInt8, flags: UInt8, stream: UInt32, payload: inout ByteBuffer, out: inout ByteBuffer) -> Bool {
        switch type {
        case 0x0:  // DATA
            unacknowledged += payload.readableBytes
            if unacknowledged >= 32_768 {
                Self.frameHeader(&out, length: 4, type: 0x8, flags: 0, stream: 0)
                out.writeInteger(UInt32(unacknowledged))
                unacknowledged = 0
            }
            if flags & 0x1 != 0 { answer(stream, &out) }
        case 0x1:  // HEADERS
            guard flags & 0x4 != 0 else { return false }
            if flags & 0x8 != 0 {
                guard let pad = payload.readInteger(as: UInt8.self), payload.readableBytes >= Int(pad) else { return false }
                payload.moveWriterIndex(to: payload.writerIndex - Int(pad))
            }
            if flags & 0x20 != 0 { payload.moveReaderIndex(forwardBy: 5) }
            guard (try? decoder.decodeHeaders(from: &payload)) != nil else { return false }
            if flags & 0x1 != 0 { answer(stream, &out) }
        case 0x4 where flags & 0x1 == 0:  // SETTINGS, acknowledged
            Self.frameHeader(&out, length: 0, type: 0x4, flags: 0x1, stream: 0)
        case 0x6 where flags & 0x1 == 0:  // PING, answered
            Self.frameHeader(&out, length: 8, type: 0x6, flags: 0x1, stream: 0)
            out.writeBuffer(&payload)
        default:
            break
        }
        return true
    }

    private func answer(_ stream: UInt32, _ out: inout ByteBuffer) {
        Self.frameHeader(&out, length: Self.answerBlock.count, type: 0x1, flags: 0x5, stream: stream)
        out.writeBytes(Self.answerBlock)
    }

    private static func frameHeader(_ out: inout ByteBuffer, length: Int, type: UInt8, flags: UInt8, stream: UInt32) {
        out.writeInteger(UInt32(length) << 8 | UInt32(type))
        out.writeInteger(flags)
        out.writeInteger(stream)
    }
}
