import NIOCore
import NIOHPACK

/// HTTP/2 frames written and read by hand (RFC 9113 §4), headers as HPACK literals without
/// Huffman coding (RFC 7541 §6.2.2).
enum HTTP2Wire {
    static let headersType: UInt8 = 1
    static let pingType: UInt8 = 6
    static let goAwayType: UInt8 = 7

    /// The client preface and an empty SETTINGS frame.
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + frame(type: 4, flags: 0, stream: 0, [])

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    static func headers(stream: UInt32, path: String, extra: [(String, String)], endStream: Bool) -> [UInt8] {
        let fields = [(":method", "POST"), (":scheme", "https"), (":path", path), (":authority", "api.push.apple.com")] + extra
        var block: [UInt8] = []
        for (name, value) in fields {
            block += [0x00] + integer(name.utf8.count) + Array(name.utf8) + integer(value.utf8.count) + Array(value.utf8)
        }
        return frame(type: headersType, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, block)
    }

    /// A string length as an HPACK integer with a 7-bit prefix (RFC 7541 §5.1), Huffman bit clear.
    static func integer(_ value: Int) -> [UInt8] {
        guard value >= 127 else { return [UInt8(value)] }
        var rest = value - 127
        var bytes: [UInt8] = [127]
        while rest >= 128 {
            bytes.append(UInt8(rest % 128) | 0x80)
            rest /= 128
        }
        return bytes + [UInt8(rest)]
    }

    static func data(stream: UInt32, _ bytes: [UInt8], endStream: Bool = false) -> [UInt8] {
        frame(type: 0, flags: endStream ? 0x1 : 0, stream: stream, bytes)
    }

    static func ping(_ tag: UInt8) -> [UInt8] {
        frame(type: pingType, flags: 0, stream: 0, [0, 0, 0, 0, 0, 0, 0, tag])
    }

    struct Frame: CustomStringConvertible {
        /// Where the frame starts in what the server sent.
        var offset: Int
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]
        var description: String { "type \(type) flags \(flags) stream \(stream) \(payload)" }
    }

    /// The frames in what a server sent, up to a partial one.
    static func frames(_ bytes: [UInt8]) -> [Frame] {
        var frames: [Frame] = []
        var index = 0
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            guard index + 9 + length <= bytes.count else { break }
            let stream = UInt32(bytes[index + 5] & 0x7F) << 24 | UInt32(bytes[index + 6]) << 16 | UInt32(bytes[index + 7]) << 8 | UInt32(bytes[index + 8])
            frames.append(Frame(offset: index, type: bytes[index + 3], flags: bytes[index + 4], stream: stream, payload: Array(bytes[(index + 9)..<(index + 9 + length)])))
            index += 9 + length
        }
        return frames
    }

    /// Whether a header block holds `:status` `status`: as a literal value, plain or Huffman
    /// coded (digits only), after `:status`'s static-table name.
    static func hasStatus(_ block: [UInt8], _ status: Int) -> Bool {
        let digits = Array(String(status).utf8)
        let plain = [UInt8(digits.count)] + digits
        let huffman = Self.huffman(digits)
        let coded = [0x80 | UInt8(huffman.count)] + huffman
        return block.contains(subsequence: plain) || block.contains(subsequence: coded)
    }

    /// Each stream's `:status`, decoding every HEADERS frame in order with one HPACK decoder (the
    /// server's dynamic table spans the connection).
    static func statuses(_ bytes: [UInt8]) -> [UInt32: String] {
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var statuses: [UInt32: String] = [:]
        for frame in frames(bytes) where frame.type == headersType {
            var block = ByteBuffer(bytes: frame.payload)
            guard let headers = try? decoder.decodeHeaders(from: &block) else { break }
            if statuses[frame.stream] == nil { statuses[frame.stream] = headers.first(name: ":status") }
        }
        return statuses
    }

    /// RFC 7541 Appendix B for the digits: '0'–'2' five bits, '3'–'9' six.
    static func huffman(_ digits: [UInt8]) -> [UInt8] {
        var bits: [Bool] = []
        for digit in digits {
            let value = Int(digit - 0x30)
            let (code, length) = value < 3 ? (value, 5) : (0x19 + value - 3, 6)
            for shift in stride(from: length - 1, through: 0, by: -1) { bits.append(code >> shift & 1 == 1) }
        }
        while bits.count % 8 != 0 { bits.append(true) }
        return stride(from: 0, to: bits.count, by: 8).map { start in bits[start..<start + 8].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) } }
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard !subsequence.isEmpty, subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains { Array(self[$0..<$0 + subsequence.count]) == subsequence }
    }
}
