/// Hexadecimal digits: one definition for every reader and writer of them (chunk sizes, JSON's
/// `\u` escapes, percent-encoding, digests and salts).
public enum Hex {
    /// The value of an ASCII hex digit of either case; nil for any other byte (no sign, no
    /// space, no digit of another script).
    @inlinable
    public static func value(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }

    /// The value of the four hex digits starting at `start` (a JSON `\u` escape); nil unless
    /// there are four and each is a digit.
    @inlinable
    public static func value4<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, at start: Bytes.Index) -> UInt32? {
        guard bytes.distance(from: start, to: bytes.endIndex) >= 4 else { return nil }
        var value: UInt32 = 0
        var index = start
        for _ in 0..<4 {
            guard let digit = Self.value(bytes[index]) else { return nil }
            value = value << 4 | UInt32(digit)
            index = bytes.index(after: index)
        }
        return value
    }

    /// Hex digits, two per byte, read as bytes; nil for an odd count or any other character
    /// (even a multi-byte one).
    public static func bytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// The sixteen digits in one case, for writers that index them by a nibble.
    public static func digits(upper: Bool) -> StaticString {
        upper ? "0123456789ABCDEF" : "0123456789abcdef"
    }

    /// The bytes as lowercase hex, two digits each.
    public static func lowercase(_ bytes: some Sequence<UInt8>) -> String {
        digits(upper: false).withUTF8Buffer { digits in
            var out: [UInt8] = []
            out.reserveCapacity(bytes.underestimatedCount * 2)
            for byte in bytes {
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 0x0F)])
            }
            return String(decoding: out, as: UTF8.self)
        }
    }
}
