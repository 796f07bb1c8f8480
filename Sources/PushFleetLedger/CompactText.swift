import Foundation
import PushFleetCore

/// An id kept for every send and receipt of a run, stored small: a UUID in its canonical text
/// (all lower or all upper case, as backends mint stored content ids) as its 16 bytes inline,
/// anything else as the string. A 36-character string would otherwise be a heap allocation of
/// ~64 bytes per send and per receipt, the largest share of what a long run keeps per send.
struct CompactText: Sendable, Equatable {
    private enum Storage: Sendable, Equatable {
        case lowerUUID(UUID)
        case upperUUID(UUID)
        case text(String)
    }

    private let storage: Storage

    init(_ text: String) {
        storage = Self.uuid(text) ?? .text(text)
    }

    /// A UUID in canonical text, 8-4-4-4-12 hex digits in one case, read in one pass:
    /// Foundation's `UUID(uuidString:)` goes through `sscanf`, which cost more than the rest
    /// of recording a receipt.
    private static func uuid(_ text: String) -> Storage? {
        var text = text
        return text.withUTF8 { bytes -> Storage? in
            guard bytes.count == 36 else { return nil }
            var out: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            var upper = false
            var lower = false
            let parsed = withUnsafeMutableBytes(of: &out) { raw -> Bool in
                var at = 0
                for index in 0..<16 {
                    if at == 8 || at == 13 || at == 18 || at == 23 {
                        guard bytes[at] == UInt8(ascii: "-") else { return false }
                        at += 1
                    }
                    guard let high = hex(bytes[at], &upper, &lower), let low = hex(bytes[at + 1], &upper, &lower) else { return false }
                    raw[index] = high << 4 | low
                    at += 2
                }
                return true
            }
            guard parsed, !(upper && lower) else { return nil }
            let uuid = UUID(uuid: out)
            return upper ? .upperUUID(uuid) : .lowerUUID(uuid)
        }
    }

    private static func hex(_ byte: UInt8, _ upper: inout Bool, _ lower: inout Bool) -> UInt8? {
        guard let value = Hex.value(byte) else { return nil }
        if value >= 10 {
            if byte >= UInt8(ascii: "a") { lower = true } else { upper = true }
        }
        return value
    }

    var text: String {
        switch storage {
        // Without Foundation's `uuidString` (formatted through `snprintf`).
        case .lowerUUID(let uuid): withUnsafeBytes(of: uuid.uuid) { UUIDText.text($0, upper: false) }
        case .upperUUID(let uuid): withUnsafeBytes(of: uuid.uuid) { UUIDText.text($0, upper: true) }
        case .text(let text): text
        }
    }
}

extension Optional where Wrapped == CompactText {
    init(_ text: String?) { self = text.map(CompactText.init) }
}
