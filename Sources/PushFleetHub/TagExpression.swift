/// A Notification Hubs tag expression: tags joined by `&&`, `||`, `!` and parentheses, as the
/// `ServiceBusNotification-Tags` header carries it (`(A || B) && !C`; a single tag is one too).
///
/// The service's limits: an expression that uses only `||` may name at most 20 tags, any other
/// at most 6; a tag is 1…120 characters of `A-Z a-z 0-9 _ @ # . : -` (reserved `$` tags such as
/// `$InstallationId:{…}` aside). The input is also bounded in length and nesting, so no header
/// can make the parser recurse deeply.
public indirect enum TagExpression: Sendable, Equatable, CustomStringConvertible {
    case tag(String)
    case not(TagExpression)
    case and(TagExpression, TagExpression)
    case or(TagExpression, TagExpression)

    public static let maxOrTags = 20
    public static let maxTags = 6
    public static let maxTagLength = 120
    public static let maxLength = 4096
    public static let maxDepth = 32

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// Parses and checks the limits.
    public static func parse(_ text: String) throws(ParseError) -> TagExpression {
        guard text.utf8.count <= maxLength else { throw ParseError(description: "tag expression over \(maxLength) bytes") }
        var parser = Parser(tokens: try tokenize(text))
        let expression = try parser.parseOr(depth: 0)
        guard parser.position == parser.tokens.count else {
            throw ParseError(description: "unexpected '\(parser.tokens[parser.position])' in tag expression")
        }
        let tags = expression.tagOccurrences
        if expression.usesOnlyOr {
            guard tags <= maxOrTags else {
                throw ParseError(description: "a tag expression of only || may name at most \(maxOrTags) tags, this one names \(tags)")
            }
        } else if tags > maxTags {
            throw ParseError(description: "a tag expression with && or ! may name at most \(maxTags) tags, this one names \(tags)")
        }
        return expression
    }

    /// True when a registration carrying `tags` is selected.
    public func matches(_ tags: Set<String>) -> Bool {
        switch self {
        case .tag(let tag): tags.contains(tag)
        case .not(let inner): !inner.matches(tags)
        case .and(let lhs, let rhs): lhs.matches(tags) && rhs.matches(tags)
        case .or(let lhs, let rhs): lhs.matches(tags) || rhs.matches(tags)
        }
    }

    /// Every distinct tag the expression names.
    public var tags: Set<String> {
        switch self {
        case .tag(let tag): [tag]
        case .not(let inner): inner.tags
        case .and(let lhs, let rhs), .or(let lhs, let rhs): lhs.tags.union(rhs.tags)
        }
    }

    /// Whether a registration with none of the expression's tags is selected (`!a` selects it).
    /// When not, only registrations carrying one of ``tags`` can match: a tag index finds them.
    public var matchesUntagged: Bool { matches([]) }

    var tagOccurrences: Int {
        switch self {
        case .tag: 1
        case .not(let inner): inner.tagOccurrences
        case .and(let lhs, let rhs), .or(let lhs, let rhs): lhs.tagOccurrences + rhs.tagOccurrences
        }
    }

    var usesOnlyOr: Bool {
        switch self {
        case .tag: true
        case .not, .and: false
        case .or(let lhs, let rhs): lhs.usesOnlyOr && rhs.usesOnlyOr
        }
    }

    public var description: String {
        switch self {
        case .tag(let tag): tag
        case .not(let inner): "!\(inner.parenthesized)"
        case .and(let lhs, let rhs): "\(lhs.parenthesized) && \(rhs.parenthesized)"
        case .or(let lhs, let rhs): "\(lhs.parenthesized) || \(rhs.parenthesized)"
        }
    }

    private var parenthesized: String {
        if case .tag = self { return description }
        return "(\(description))"
    }

    /// Whether `tag` may appear in a registration or an expression.
    public static func isValidTag(_ tag: Substring) -> Bool {
        guard (1...maxTagLength).contains(tag.utf8.count) else { return false }
        // Installations' implicit tags: `$InstallationId:{id}`, `$UserId:{id}`.
        if tag.first == "$" {
            return tag.utf8.count > 1 && tag.utf8.dropFirst().allSatisfy { isTagByte($0) || $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "}") }
        }
        return tag.utf8.allSatisfy(isTagByte)
    }

    /// Tags starting with `$` are the hub's own (`$InstallationId:{id}`, `$UserId:{id}`): sends
    /// may name them, registrations and installations may not carry them, or a device could
    /// take another installation's or user's notifications.
    public static func isReserved(_ tag: Substring) -> Bool { tag.first == "$" }

    /// The service's words when a registration or installation carries one.
    public static let reservedTagMessage = "Tags can not start with $"

    static func isTagByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "_"), UInt8(ascii: "@"), UInt8(ascii: "#"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "-"): true
        default: false
        }
    }

    // MARK: Parsing

    enum Token: Equatable, CustomStringConvertible {
        case tag(String), and, or, not, open, close

        var description: String {
            switch self {
            case .tag(let tag): tag
            case .and: "&&"
            case .or: "||"
            case .not: "!"
            case .open: "("
            case .close: ")"
            }
        }
    }

    static func tokenize(_ text: String) throws(ParseError) -> [Token] {
        var tokens: [Token] = []
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"):
                index += 1
            case UInt8(ascii: "("):
                tokens.append(.open)
                index += 1
            case UInt8(ascii: ")"):
                tokens.append(.close)
                index += 1
            case UInt8(ascii: "!"):
                tokens.append(.not)
                index += 1
            case UInt8(ascii: "&"), UInt8(ascii: "|"):
                guard index + 1 < bytes.count, bytes[index + 1] == byte else {
                    throw ParseError(description: "'\(Character(Unicode.Scalar(byte)))' must be doubled ('&&', '||')")
                }
                tokens.append(byte == UInt8(ascii: "&") ? .and : .or)
                index += 2
            default:
                let start = index
                let reserved = byte == UInt8(ascii: "$")
                if reserved { index += 1 }
                while index < bytes.count,
                    isTagByte(bytes[index]) || (reserved && (bytes[index] == UInt8(ascii: "{") || bytes[index] == UInt8(ascii: "}")))
                {
                    index += 1
                }
                let tag = String(decoding: bytes[start..<index], as: UTF8.self)
                guard index > start, isValidTag(tag[...]) else {
                    throw ParseError(description: "invalid tag '\(tag.isEmpty ? String(decoding: [byte], as: UTF8.self) : tag)': tags are 1-\(maxTagLength) characters of A-Z a-z 0-9 _@#.:-")
                }
                tokens.append(.tag(tag))
            }
        }
        guard !tokens.isEmpty else { throw ParseError(description: "empty tag expression") }
        return tokens
    }

    struct Parser {
        let tokens: [Token]
        var position = 0

        private var next: Token? { position < tokens.count ? tokens[position] : nil }

        // or := and ('||' and)* ; and := unary ('&&' unary)* ; unary := '!' unary | '(' or ')' | tag
        mutating func parseOr(depth: Int) throws(ParseError) -> TagExpression {
            var lhs = try parseAnd(depth: depth)
            while next == .or {
                position += 1
                lhs = .or(lhs, try parseAnd(depth: depth))
            }
            return lhs
        }

        mutating func parseAnd(depth: Int) throws(ParseError) -> TagExpression {
            var lhs = try parseUnary(depth: depth)
            while next == .and {
                position += 1
                lhs = .and(lhs, try parseUnary(depth: depth))
            }
            return lhs
        }

        mutating func parseUnary(depth: Int) throws(ParseError) -> TagExpression {
            guard depth < TagExpression.maxDepth else { throw ParseError(description: "tag expression nested too deeply") }
            switch next {
            case .not:
                position += 1
                return .not(try parseUnary(depth: depth + 1))
            case .open:
                position += 1
                let inner = try parseOr(depth: depth + 1)
                guard next == .close else { throw ParseError(description: "missing ')' in tag expression") }
                position += 1
                return inner
            case .tag(let tag):
                position += 1
                return .tag(tag)
            case let token?:
                throw ParseError(description: "unexpected '\(token)' in tag expression")
            case nil:
                throw ParseError(description: "tag expression ends early")
            }
        }
    }
}
