import Foundation

/// An RFC 6901 JSON Pointer (`/aps/alert`, `/items/0/id`, `/a~1b` for the key `a/b`), evaluated
/// by scanning the JSON text: no tree is built, and the value keeps its source text, so a number
/// or an object can go back into a JSON body as it was.
public struct JSONPointer: Sendable, Equatable {
    public var tokens: [[UInt8]]
    public var source: String

    /// - Throws: when the text is neither empty nor starts with `/`, or has a `~` that is not
    ///   `~0` or `~1` (RFC 6901's only escapes).
    public init(_ text: String) throws(TemplateError) {
        source = text
        guard !text.isEmpty else {
            tokens = []
            return
        }
        guard text.hasPrefix("/") else { throw TemplateError("a JSON Pointer starts with '/' (or is \"\" for the whole document)") }
        var tokens: [[UInt8]] = [[]]
        var bytes = text.utf8.dropFirst().makeIterator()
        while let byte = bytes.next() {
            switch byte {
            case UInt8(ascii: "/"): tokens.append([])
            case UInt8(ascii: "~"):
                switch bytes.next() {
                case UInt8(ascii: "0"): tokens[tokens.count - 1].append(UInt8(ascii: "~"))
                case UInt8(ascii: "1"): tokens[tokens.count - 1].append(UInt8(ascii: "/"))
                default:
                    throw TemplateError("'~' in a JSON Pointer must be followed by 0 (for '~') or 1 (for '/')")
                }
            default: tokens[tokens.count - 1].append(byte)
            }
        }
        self.tokens = tokens
    }

    /// The value at the pointer in a JSON text: a string's text unescaped, any other value's
    /// source; nil when the text is not JSON there or the pointer leads nowhere.
    public func value(in bytes: some Collection<UInt8>) -> APIValue? {
        var scanner = JSONScanner(Array(bytes))
        for token in tokens {
            guard scanner.descend(into: token) else { return nil }
        }
        return scanner.currentValue()
    }
}

/// Walks JSON text without building it: enough to follow a pointer and read the value there.
struct JSONScanner {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        skipSpace()
    }

    @inline(__always)
    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    mutating func skipSpace() {
        while index < bytes.count, Self.isSpace(bytes[index]) { index += 1 }
    }

    /// Moves to the member `token` of the object, or the element `token` of the array, here.
    mutating func descend(into token: [UInt8]) -> Bool {
        guard index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            index += 1
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { return false }
            while index < bytes.count {
                guard let key = readString() else { return false }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                skipSpace()
                if key == token { return true }
                guard skipValue() else { return false }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ",") else { return false }
                index += 1
                skipSpace()
            }
            return false
        case UInt8(ascii: "["):
            // RFC 6901: decimal digits without a leading zero (`Int` alone would take "+1").
            guard !token.isEmpty, token.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                token.first != UInt8(ascii: "0") || token.count == 1,
                let wanted = Int(String(decoding: token, as: UTF8.self))
            else { return false }
            index += 1
            skipSpace()
            var position = 0
            while index < bytes.count, bytes[index] != UInt8(ascii: "]") {
                if position == wanted { return true }
                guard skipValue() else { return false }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ",") else { return false }
                index += 1
                skipSpace()
                position += 1
            }
            return false
        default:
            return false
        }
    }

    /// The value here: a string unescaped as text, anything else as its JSON source.
    mutating func currentValue() -> APIValue? {
        guard index < bytes.count else { return nil }
        if bytes[index] == UInt8(ascii: "\"") {
            return readString().map { .text(String(decoding: $0, as: UTF8.self)) }
        }
        let start = index
        guard skipValue() else { return nil }
        return .json(String(decoding: bytes[start..<index], as: UTF8.self))
    }

    /// Reads a string here, unescaped, as UTF-8 bytes.
    mutating func readString() -> [UInt8]? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        index += 1
        var out: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return out
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return nil }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "u"):
                    guard var scalar = readHex4() else { return nil }
                    // A surrogate pair names one character beyond the first plane.
                    if (0xD800..<0xDC00).contains(scalar), index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u")
                    {
                        index += 2
                        guard let low = readHex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { return nil }
                    out.append(contentsOf: String(Character(unicode)).utf8)
                // Leniently, an escape JSON does not have stands for its character.
                default: out.append(JSONEscape.byte(escaped) ?? escaped)
                }
            default: out.append(byte)
            }
        }
        return nil
    }

    private mutating func readHex4() -> UInt32? {
        // Four digits exactly: `UInt32(_:radix:)` would also take a sign ("\u+041").
        guard let value = Hex.value4(bytes, at: index) else { return nil }
        index += 4
        return value
    }

    /// Steps over one value of any kind.
    mutating func skipValue() -> Bool {
        guard index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            return skipString()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    guard skipString() else { return false }
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        index += 1
                        return true
                    }
                default: break
                }
                index += 1
            }
            return false
        default:
            // A number, true, false or null: up to the next delimiter.
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") || Self.isSpace(byte) { break }
                index += 1
            }
            return index > start
        }
    }

    private mutating func skipString() -> Bool {
        index += 1
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\\"): index += 2
            case UInt8(ascii: "\""):
                index += 1
                return true
            default: index += 1
            }
        }
        return false
    }
}
