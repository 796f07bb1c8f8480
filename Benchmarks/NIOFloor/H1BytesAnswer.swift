import NIOCore

/// HTTP/1.1 answered on the connection's bytes in a NIO channel, without NIO's HTTP codec: a
/// request is complete at its blank line plus its `content-length`, and each is answered with one
/// constant "200, empty body". What NIO's channel, pipeline and buffers cost per request with no
/// codec at all, the shape of the push service's fast path (docs/performance-push.md).
/// A measurement only: no chunked bodies, no limits; a head it cannot read closes the connection.
final class H1BytesAnswer: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var pending: ByteBuffer?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if var held = pending {
            held.writeBuffer(&bytes)
            bytes = held
        }
        var answers = 0
        let complete = bytes.withUnsafeReadableBytes { raw -> Int? in
            var offset = 0
            while let length = H1Request.length(raw[offset...]) {
                guard length > 0 else { return nil }
                offset += length
                answers += 1
            }
            return offset
        }
        guard let complete else { return context.close(promise: nil) }
        bytes.moveReaderIndex(forwardBy: complete)
        pending = bytes.readableBytes > 0 ? bytes : nil
        for _ in 0..<answers {
            context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: H1Request.answer)), promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
}

/// The request framing both byte-level floors share. Not the push service's `HTTP1RequestScan`:
/// the floors measure a request with no reading of its fields, which is the scan's own cost.
enum H1Request {
    static let answer = Array("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".utf8)

    /// The length of the whole request at the start of `bytes`: nil while it is incomplete, 0 for
    /// a head that cannot be read (no `content-length` digits where one is named).
    static func length(_ bytes: Slice<UnsafeRawBufferPointer>) -> Int? {
        var index = bytes.startIndex
        var lineStart = index
        var contentLength = 0
        while index + 1 < bytes.endIndex {
            guard bytes[index] == UInt8(ascii: "\r"), bytes[index + 1] == UInt8(ascii: "\n") else {
                index += 1
                continue
            }
            if index == lineStart {
                let end = index + 2 + contentLength
                return end <= bytes.endIndex ? end - bytes.startIndex : nil
            }
            if let value = contentLengthValue(bytes[lineStart..<index]) {
                guard value >= 0 else { return 0 }
                contentLength = value
            }
            index += 2
            lineStart = index
        }
        return nil
    }

    private static let name = Array("content-length:".utf8)

    /// The field's value when the line is `content-length`, -1 when its value is not digits.
    private static func contentLengthValue(_ line: Slice<UnsafeRawBufferPointer>) -> Int? {
        guard line.count > name.count else { return nil }
        for (offset, expected) in name.enumerated() where line[line.startIndex + offset] | 0x20 != expected | 0x20 {
            return nil
        }
        var value = 0
        var digits = 0
        for byte in line.dropFirst(name.count) where byte != UInt8(ascii: " ") {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte), digits < 9 else { return -1 }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            digits += 1
        }
        return digits > 0 ? value : -1
    }
}
