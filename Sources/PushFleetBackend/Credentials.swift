import Foundation

/// What an `Authorization` header carries.
enum Credentials: Equatable {
    case basic(user: String, password: String)
    case bearer(String)

    enum ParseError: Error, Equatable, CustomStringConvertible {
        case missing
        case unsupportedScheme
        case malformedBasic

        var description: String {
            switch self {
            case .missing: "missing Authorization header"
            case .unsupportedScheme: "Authorization must be Basic or Bearer"
            case .malformedBasic: "Basic credentials must be base64 of user:password with a non-empty user"
            }
        }
    }

    /// Parses a header value. The seed crashed on a missing header and accepted an empty user;
    /// both are refused here. Every authenticated request comes through here, so it works on the
    /// string's own characters (Foundation's trimming bridges through NSString).
    init(header: String?) throws(ParseError) {
        guard let header, case let trimmed = Self.trimmed(header[...]), !trimmed.isEmpty else { throw .missing }
        guard let space = trimmed.firstIndex(where: Self.isBlank) else { throw .unsupportedScheme }
        let value = Self.trimmed(trimmed[space...])
        guard !value.isEmpty else { throw .unsupportedScheme }
        switch trimmed[..<space].lowercased() {
        case "basic":
            guard let data = Data(base64Encoded: String(value)), let text = String(data: data, encoding: .utf8),
                let colon = text.firstIndex(of: ":")
            else { throw .malformedBasic }
            let user = String(text[..<colon])
            guard !user.isEmpty else { throw .malformedBasic }
            self = .basic(user: user, password: String(text[text.index(after: colon)...]))
        case "bearer":
            self = .bearer(String(value))
        default:
            throw .unsupportedScheme
        }
    }

    /// HTTP's optional whitespace: spaces and tabs.
    private static func isBlank(_ character: Character) -> Bool {
        character == " " || character == "\t"
    }

    private static func trimmed(_ text: Substring) -> Substring {
        guard let first = text.firstIndex(where: { !isBlank($0) }), let last = text.lastIndex(where: { !isBlank($0) }) else { return "" }
        return text[first...last]
    }
}
