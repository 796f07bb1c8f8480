import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
    /// work out from another (a notification's, a provider request's). The bytes are drawn from
    /// the system 4 KiB at a time (`/dev/urandom`): `SystemRandomNumberGenerator` makes a
    /// `getrandom` call per `next()`, two per id, ~1.5% of `serve`'s CPU per secure push with its
    /// two ids.
    package static func unguessable(upper: Bool) -> String {
        let (high, low) = systemBytes.withLock { $0.take() }
        return version4(high, low, upper: upper)
    }

    private static let systemBytes = Mutex(SystemBytes())

    /// Bytes from the system's random source, handed out once each.
    private struct SystemBytes: ~Copyable {
        private var words = [UInt64](repeating: 0, count: 512)
        private var next = 512

        mutating func take() -> (UInt64, UInt64) {
            if next + 2 > words.count {
                if !words.withUnsafeMutableBytes(Self.fillFromSystem) {
                    var generator = SystemRandomNumberGenerator()
                    for index in words.indices { words[index] = generator.next() }
                }
                next = 0
            }
            defer { next += 2 }
            return (words[next], words[next + 1])
        }

        /// The whole buffer in one read of the system's source (glibc before 2.36 has no
        /// `arc4random_buf`, and Swift's Glibc module does not declare `getrandom`); false leaves
        /// it to the generator.
        private static func fillFromSystem(_ buffer: UnsafeMutableRawBufferPointer) -> Bool {
            #if canImport(Glibc)
            let descriptor = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return false }
            defer { close(descriptor) }
            var filled = 0
            while filled < buffer.count {
                let got = read(descriptor, buffer.baseAddress! + filled, buffer.count - filled)
                if got > 0 {
                    filled += got
                } else if got < 0, errno == EINTR {
                    continue
                } else {
                    return false
                }
            }
            return true
            #elseif canImport(Darwin)
            arc4random_buf(buffer.baseAddress!, buffer.count)
            return true
            #else
            return false
            #endif
        }
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
