import HTTPTypes
import NIOCore

/// An answer's header block as HPACK writes it with no dynamic table (RFC 7541): `:status` from
/// the static table, every other field a literal not indexed, no Huffman coding. Such a block
/// leaves the client's table as it was, so it can be written beside NIO's encoder's blocks on one
/// connection (``HTTP2ConnectionFrontState``).
enum HTTP2AnswerBlock {
    static func write(_ answer: CompleteResponse, to out: inout ByteBuffer) {
        // Indexed `:status` (static entries 8–14), else a literal with `:status`'s name (index 8).
        switch answer.status.code {
        case 200: out.writeInteger(UInt8(0x88))
        case 204: out.writeInteger(UInt8(0x89))
        case 206: out.writeInteger(UInt8(0x8A))
        case 304: out.writeInteger(UInt8(0x8B))
        case 400: out.writeInteger(UInt8(0x8C))
        case 404: out.writeInteger(UInt8(0x8D))
        case 500: out.writeInteger(UInt8(0x8E))
        default:
            out.writeInteger(UInt8(0x08))
            writeString(String(answer.status.code), to: &out)
        }
        for field in answer.headers where field.name != .contentLength {
            out.writeInteger(UInt8(0x00))
            writeString(field.name.canonicalName, to: &out)
            writeString(field.value, to: &out)
        }
        // `content-length` by its static name (index 28): a literal not indexed, 4-bit prefix.
        out.writeBytes([0x0F, 0x0D])
        writeString(String(answer.body.readableBytes), to: &out)
    }

    /// A string literal without Huffman coding: its length as an integer with a 7-bit prefix.
    private static func writeString(_ string: String, to out: inout ByteBuffer) {
        var length = string.utf8.count
        if length < 127 {
            out.writeInteger(UInt8(length))
        } else {
            out.writeInteger(UInt8(127))
            length -= 127
            while length >= 128 {
                out.writeInteger(UInt8(length & 0x7F | 0x80))
                length >>= 7
            }
            out.writeInteger(UInt8(length))
        }
        out.writeString(string)
    }
}
