import NIOCore
import NIOHPACK

/// What ``HTTP2ConnectionFrontState`` writes: frames for NIO's handler (a held stream's, a header
/// block encoded again) and for the client (window updates, GOAWAY).
extension HTTP2ConnectionFrontState {
    /// The lowest held stream's frames go on to NIO, its blocks encoded again.
    mutating func giveFirst() {
        let request = held.removeFirst()
        for item in request.items {
            switch item {
            case .headers(let fields, let endStream): give(request.stream, fields, endStream: endStream)
            case .raw(var raw): forward.writeBuffer(&raw)
            }
        }
    }

    /// A header block for NIO: HEADERS, and CONTINUATION frames past the frame size.
    mutating func give(_ stream: UInt32, _ fields: HPACKHeaders, endStream: Bool) {
        if stream % 2 == 1, stream > highestGiven { highestGiven = stream }
        var encoded = ByteBuffer()
        do {
            try encoder.encode(headers: fields, to: &encoded)
        } catch {
            // Not reachable with a decoded block; NIO would see a table out of step.
            _ = fail(ErrorCode.internalError)
            return
        }
        var first = true
        repeat {
            let size = min(encoded.readableBytes, Self.maxFrameSize)
            var chunk = encoded.readSlice(length: size)!
            var flags: UInt8 = encoded.readableBytes == 0 ? 0x4 : 0
            if first, endStream { flags |= 0x1 }
            Self.writeFrameHeader(&forward, length: size, type: first ? 0x1 : 0x9, flags: flags, stream: stream)
            forward.writeBuffer(&chunk)
            first = false
        } while encoded.readableBytes > 0
    }

    mutating func writeWindowUpdate(_ increment: UInt32) {
        Self.writeFrameHeader(&output, length: 4, type: 0x8, flags: 0, stream: 0)
        output.writeInteger(increment)
    }

    mutating func fail(_ code: UInt32) -> Event {
        phase = .failed
        held = []
        block = nil
        goAway(code)
        return .fail(code)
    }

    /// A GOAWAY naming the highest stream opened: NO_ERROR for an idle connection.
    package mutating func goAway(_ code: UInt32 = 0) {
        Self.writeFrameHeader(&output, length: 8, type: 0x7, flags: 0, stream: 0)
        output.writeInteger(highestSeen)
        output.writeInteger(code)
    }

    /// Removes a padded frame's padding (RFC 9113 §6.1); false when the padding is longer than the frame.
    static func stripPadding(_ payload: inout ByteBuffer, flags: UInt8) -> Bool {
        guard flags & 0x8 != 0 else { return true }
        guard let pad = payload.readInteger(as: UInt8.self), Int(pad) <= payload.readableBytes else { return false }
        payload.moveWriterIndex(to: payload.writerIndex - Int(pad))
        return true
    }

    static func writeFrameHeader(_ out: inout ByteBuffer, length: Int, type: UInt8, flags: UInt8, stream: UInt32) {
        out.writeInteger(UInt32(length) << 8 | UInt32(type))
        out.writeInteger(flags)
        out.writeInteger(stream)
    }
}
