import Foundation
import PushFleetCore

/// One way to bend a frame's JSON text, for the one-pass readers' tests: each suite lists the
/// ways that reach its frame's members, and ``bend(_:_:_:)`` draws one.
enum JSONBend {
    /// Spaces, a newline and a tab around every comma and colon.
    case spaced
    /// The first occurrence of the one text by the other (nothing when it is absent).
    case replace(String, String)
    /// The text cut at a random length.
    case cut
    /// One byte, at random, made a random ASCII byte.
    case strayByte

    static func bend(_ text: String, _ rng: inout SplitMix64, _ ways: [JSONBend]) -> String {
        var text = text
        switch ways[Int(rng.next() % UInt64(ways.count))] {
        case .spaced:
            text = text.replacingOccurrences(of: ",", with: " ,\n\t").replacingOccurrences(of: ":", with: " : ")
        case .replace(let pattern, let replacement):
            if let range = text.range(of: pattern) { text.replaceSubrange(range, with: replacement) }
        case .cut:
            text = String(text.prefix(Int(rng.next() % UInt64(max(1, text.count)))))
        case .strayByte:
            var bytes = Array(text.utf8)
            if !bytes.isEmpty { bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(rng.next() % 128) }
            text = String(decoding: bytes, as: UTF8.self)
        }
        return text
    }
}
