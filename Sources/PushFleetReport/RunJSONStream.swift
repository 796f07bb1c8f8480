import Foundation
import PushFleetResults

/// `run.json`, written as JSONEncoder writes it (keys sorted, no whitespace) but with its
/// `users` array encoded ``usersPerPiece`` rows at a time. Encoding a million users' rows in one
/// call builds the encoder's tree of every value first, several times the size of the text.
enum RunJSONStream {
    static let usersPerPiece = 4096

    struct MissingUsersSlot: Error, CustomStringConvertible {
        var description: String { "run.json: the encoded result has no top-level \"users\":[] to fill" }
    }

    static func write(_ result: RunResult, usersPerPiece: Int = usersPerPiece, emit: (Data) throws -> Void) throws {
        let encoder = ReportFiles.runJSONEncoder()
        var rest = result
        rest.users = []
        let outline = try encoder.encode(rest)
        guard let slot = usersSlot(in: outline) else { throw MissingUsersSlot() }
        try emit(outline[..<slot])
        var start = 0
        while start < result.users.count {
            let end = min(start + max(usersPerPiece, 1), result.users.count)
            let piece = try encoder.encode(Array(result.users[start..<end]))
            // The piece is a whole array; its brackets are the outline's.
            var inner = Data(capacity: piece.count - 1)
            if start > 0 { inner.append(UInt8(ascii: ",")) }
            inner.append(piece.dropFirst().dropLast())
            try emit(inner)
            start = end
        }
        try emit(outline[slot...])
    }

    /// The offset just inside the brackets of the top-level `"users":[]`.
    static func usersSlot(in json: Data) -> Data.Index? {
        let key = Array("\"users\":[]".utf8)
        var depth = 0
        var inString = false
        var escaped = false
        var index = json.startIndex
        while index < json.endIndex {
            let byte = json[index]
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else {
                switch byte {
                case UInt8(ascii: "\""):
                    if depth == 1, json[index...].starts(with: key) { return index + key.count - 1 }
                    inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
                default: break
                }
            }
            index += 1
        }
        return nil
    }
}
