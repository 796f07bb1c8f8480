import Foundation

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
        if text.utf8.count == 36, let uuid = UUID(uuidString: text) {
            // Parsed, so it is the canonical form; its letters' case decides which, without
            // building either form (this runs for every send and receipt).
            let upper = text.utf8.contains { (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0) }
            let lower = text.utf8.contains { (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
            if !(upper && lower) {
                storage = upper ? .upperUUID(uuid) : .lowerUUID(uuid)
                return
            }
        }
        storage = .text(text)
    }

    var text: String {
        switch storage {
        case .lowerUUID(let uuid): uuid.uuidString.lowercased()
        case .upperUUID(let uuid): uuid.uuidString
        case .text(let text): text
        }
    }
}

extension Optional where Wrapped == CompactText {
    init(_ text: String?) { self = text.map(CompactText.init) }
}
