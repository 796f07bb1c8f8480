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
    /// both are refused here.
    init(header: String?) throws(ParseError) {
        guard let header = header?.trimmingCharacters(in: .whitespaces), !header.isEmpty else { throw .missing }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2 else { throw .unsupportedScheme }
        let value = parts[1].trimmingCharacters(in: .whitespaces)
        switch parts[0].lowercased() {
        case "basic":
            guard let data = Data(base64Encoded: value), let text = String(data: data, encoding: .utf8),
                let colon = text.firstIndex(of: ":")
            else { throw .malformedBasic }
            let user = String(text[..<colon])
            guard !user.isEmpty else { throw .malformedBasic }
            self = .basic(user: user, password: String(text[text.index(after: colon)...]))
        case "bearer":
            guard !value.isEmpty else { throw .unsupportedScheme }
            self = .bearer(value)
        default:
            throw .unsupportedScheme
        }
    }
}
