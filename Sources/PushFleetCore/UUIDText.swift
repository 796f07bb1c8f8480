import Synchronization

/// UUIDs as text on a server's hot path, without Foundation: `UUID()` reads `/dev/urandom`
/// (an open, a read and a close per id), `uuidString` formats through `snprintf`, and
/// `UUID(uuidString:)` scans through `sscanf`.
package enum UUIDText {
    /// 8-4-4-4-12 hex digits of either case, as `UUID(uuidString:)` accepts them.
    package static func isValid(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard bytes.count == 36 else { return false }
            for (index, byte) in bytes.enumerated() {
                if index == 8 || index == 13 || index == 18 || index == 23 {
                    guard byte == UInt8(ascii: "-") else { return false }
                    continue
                }
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): break
                default: return false
                }
            }
            return true
        }
    }

    private static let sequence = Atomic<UInt64>(0)
    private static let seed: UInt64 = {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }()

    /// A new version-4 UUID in upper case, as `UUID().uuidString` writes it: unique in this
    /// process and unpredictable across processes (a per-process random seed), not secret.
    package static func random() -> String {
        var generator = SplitMix64(seed: seed ^ sequence.add(1, ordering: .relaxed).newValue &* 0x9E37_79B9_7F4A_7C15)
        return version4(generator.next(), generator.next(), upper: true)
    }

    /// A new version-4 UUID from the system's random source, for ids one must not be able to
    /// work out from another (a notification's, a provider request's): one `getrandom` call
    /// where `UUID()` opens, reads and closes `/dev/urandom`.
    package static func unguessable(upper: Bool) -> String {
        var generator = SystemRandomNumberGenerator()
        return version4(generator.next(), generator.next(), upper: upper)
    }

    private static func version4(_ high: UInt64, _ low: UInt64, upper: Bool) -> String {
        let high = (high & ~0xF000) | 0x4000
        let low = (low & ~(0xC000_0000_0000_0000 as UInt64)) | 0x8000_0000_0000_0000
        return withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { text($0, upper: upper) }
    }

    /// 16 bytes as canonical UUID text (8-4-4-4-12), in one case.
    package static func text(_ bytes: UnsafeRawBufferPointer, upper: Bool) -> String {
        return Hex.digits(upper: upper).withUTF8Buffer { digits in
            String(unsafeUninitializedCapacity: 36) { out in
                var at = 0
                for (index, byte) in bytes.prefix(16).enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    out[at] = digits[Int(byte >> 4)]
                    out[at + 1] = digits[Int(byte & 0x0F)]
                    at += 2
                }
                return at
            }
        }
    }
}
