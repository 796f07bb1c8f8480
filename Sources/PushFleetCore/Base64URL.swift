public import Foundation

/// Base64url without padding (RFC 4648 §5), as JWTs and the hub's continuation tokens write it.
/// Written out because the backend decodes one on every authenticated request, Foundation's
/// string replacements around its base64 bridge through NSString, and jwt-kit keeps its codec
/// to its own package.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    public static func encode(_ data: Data) -> String {
        Base64.encode(data, alphabet: alphabet, padded: false)
    }

    /// Nil for any other character, padding, an impossible length, or bits set past the last
    /// byte (so that one value has one spelling).
    public static func decode(_ text: some StringProtocol) -> Data? {
        let bytes = Array(text.utf8)
        guard bytes.count % 4 != 1 else { return nil }
        var out = Data(capacity: bytes.count * 3 / 4)
        var group: UInt32 = 0
        var count = 0
        for byte in bytes {
            let value = values[Int(byte)]
            guard value != 0xFF else { return nil }
            group = group << 6 | UInt32(value)
            count += 1
            if count == 4 {
                out.append(UInt8(group >> 16 & 0xFF))
                out.append(UInt8(group >> 8 & 0xFF))
                out.append(UInt8(group & 0xFF))
                group = 0
                count = 0
            }
        }
        switch count {
        case 2:
            guard group & 0xF == 0 else { return nil }
            out.append(UInt8(group >> 4 & 0xFF))
        case 3:
            guard group & 0x3 == 0 else { return nil }
            out.append(UInt8(group >> 10 & 0xFF))
            out.append(UInt8(group >> 2 & 0xFF))
        default: break
        }
        return out
    }
}

/// Standard base64 with padding (RFC 4648 §4), as a `Basic` credential writes it: made for every
/// request of a description that sends one, so without Foundation's `Data` on the way.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ text: String) -> String {
        encode(Array(text.utf8), alphabet: alphabet, padded: true)
    }

    static func encode<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, alphabet: [UInt8], padded: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let remaining = bytes.distance(from: index, to: bytes.endIndex)
            let b0 = UInt32(bytes[index])
            let b1 = remaining > 1 ? UInt32(bytes[bytes.index(index, offsetBy: 1)]) : 0
            let b2 = remaining > 2 ? UInt32(bytes[bytes.index(index, offsetBy: 2)]) : 0
            let group = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(group >> 18 & 63)])
            out.append(alphabet[Int(group >> 12 & 63)])
            if remaining > 1 { out.append(alphabet[Int(group >> 6 & 63)]) } else if padded { out.append(UInt8(ascii: "=")) }
            if remaining > 2 { out.append(alphabet[Int(group & 63)]) } else if padded { out.append(UInt8(ascii: "=")) }
            index = bytes.index(index, offsetBy: min(3, remaining))
        }
        return String(decoding: out, as: UTF8.self)
    }
}
