/// A push frame read in one pass over its bytes, without Foundation's `JSONDecoder`: decoding
/// every push through `Codable` cost ~14% of the fleet's CPU per push.
///
/// It reads only what it is sure of — an object whose keys it knows, each once, with plain
/// integers, `true`/`false`, strings (escapes included) and `null` for optional fields — and
/// answers nil for anything else (a Web Push frame's nested headers, a number with a fraction or
/// an exponent, a repeated key, anything that is not JSON), so the caller decodes those with
/// `JSONDecoder` and the answer is the same either way.
extension PushFrame {
    public init?(fastJSON bytes: UnsafeBufferPointer<UInt8>) {
        var reader = FrameReader(bytes: bytes)
        guard let frame = reader.frame() else { return nil }
        self = frame
    }
}

private struct FrameReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var at = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private enum Key: String, CaseIterable {
        case type, platform, token, id, acceptedAt, pushType, body, bodyEncoding, stored, reason, push, writtenAt, hubAt, delay
    }

    mutating func frame() -> PushFrame? {
        skipSpace()
        guard take(UInt8(ascii: "{")) else { return nil }
        var type: String?, platform: Platform?, token: String?, id: String?, acceptedAt: Int64?, pushType: String?, body: String?
        var stored: Bool?
        var bodyEncoding: String??, reason: String??, push: UInt64??, writtenAt: Int64??, hubAt: Int64??, delay: Int64??
        // Keys read so far, one bit each.
        var seen: UInt32 = 0
        skipSpace()
        if !take(UInt8(ascii: "}")) {
            repeat {
                skipSpace()
                guard let name = string() else { return nil }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard let key = Key(rawValue: name) else {
                    // Not a field of a frame: sure of it only if it is a plain value.
                    guard skipScalar() else { return nil }
                    skipSpace()
                    continue
                }
                let bit = UInt32(1) << Key.allCases.firstIndex(of: key)!
                guard seen & bit == 0 else { return nil }
                seen |= bit
                switch key {
                case .type: guard let value = string() else { return nil }; type = value
                case .platform: guard let value = string().flatMap(Platform.init(rawValue:)) else { return nil }; platform = value
                case .token: guard let value = string() else { return nil }; token = value
                case .id: guard let value = string() else { return nil }; id = value
                case .acceptedAt: guard let value = integer() else { return nil }; acceptedAt = value
                case .pushType: guard let value = string() else { return nil }; pushType = value
                case .body: guard let value = string() else { return nil }; body = value
                case .stored: guard let value = boolean() else { return nil }; stored = value
                case .bodyEncoding: guard let value = optional({ $0.string() }) else { return nil }; bodyEncoding = value
                case .reason: guard let value = optional({ $0.string() }) else { return nil }; reason = value
                case .push: guard let value = optional({ $0.unsigned() }) else { return nil }; push = value
                case .writtenAt: guard let value = optional({ $0.integer() }) else { return nil }; writtenAt = value
                case .hubAt: guard let value = optional({ $0.integer() }) else { return nil }; hubAt = value
                case .delay: guard let value = optional({ $0.integer() }) else { return nil }; delay = value
                }
                skipSpace()
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return nil }
        }
        skipSpace()
        guard at == bytes.count, let type, let platform, let token, let id, let acceptedAt, let pushType, let body, let stored else {
            return nil
        }
        var frame = PushFrame(
            platform: platform, token: token, id: id, acceptedAt: acceptedAt, pushType: pushType, body: body,
            bodyEncoding: bodyEncoding ?? nil, stored: stored
        )
        frame.type = type
        frame.reason = reason ?? nil
        frame.push = push ?? nil
        frame.writtenAt = writtenAt ?? nil
        frame.hubAt = hubAt ?? nil
        frame.delay = delay ?? nil
        return frame
    }

    // MARK: Values

    /// `null` (an absent value), or what `read` reads; nil when neither.
    private mutating func optional<T>(_ read: (inout FrameReader) -> T?) -> T?? {
        if literal("null") { return .some(nil) }
        guard let value = read(&self) else { return nil }
        return .some(value)
    }

    private mutating func boolean() -> Bool? {
        if literal("true") { return true }
        if literal("false") { return false }
        return nil
    }

    /// A plain integer (`-`, then digits without a leading zero) that fits; nil otherwise.
    private mutating func integer() -> Int64? {
        let negative = take(UInt8(ascii: "-"))
        guard let magnitude = digits() else { return nil }
        if negative {
            return magnitude <= UInt64(Int64.max) + 1 ? (magnitude == UInt64(Int64.max) + 1 ? .min : -Int64(magnitude)) : nil
        }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    private mutating func unsigned() -> UInt64? {
        digits()
    }

    private mutating func digits() -> UInt64? {
        let start = at
        var value: UInt64 = 0
        while at < bytes.count, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") {
            let (times, over1) = value.multipliedReportingOverflow(by: 10)
            let (sum, over2) = times.addingReportingOverflow(UInt64(bytes[at] - UInt8(ascii: "0")))
            guard !over1, !over2 else { return nil }
            value = sum
            at += 1
        }
        guard at > start, !(at - start > 1 && bytes[start] == UInt8(ascii: "0")) else { return nil }
        // A fraction or an exponent: JSONDecoder's to judge.
        if at < bytes.count {
            switch bytes[at] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        return value
    }

    /// A string, its escapes resolved; nil for anything JSON does not allow.
    private mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = at
        while at < bytes.count {
            let byte = bytes[at]
            if byte == UInt8(ascii: "\"") {
                defer { at += 1 }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") { return escapedString(from: start) }
            if byte < 0x20 { return nil }
            at += 1
        }
        return nil
    }

    /// The rest of a string that has escapes, from its first byte at `start`.
    private mutating func escapedString(from start: Int) -> String? {
        var out = [UInt8](UnsafeBufferPointer(rebasing: bytes[start..<at]))
        while at < bytes.count {
            let byte = bytes[at]
            at += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard at < bytes.count else { return nil }
                let escape = bytes[at]
                at += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return nil }
                    out.append(contentsOf: String(Character(scalar)).utf8)
                default: return nil
                }
            default:
                guard byte >= 0x20 else { return nil }
                out.append(byte)
            }
        }
        return nil
    }

    /// After `\u`: one scalar, a surrogate pair included; nil for a lone surrogate.
    private mutating func unicodeEscape() -> Unicode.Scalar? {
        guard let high = hex4() else { return nil }
        if (0xD800...0xDBFF).contains(high) {
            guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
            return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        }
        return Unicode.Scalar(high)
    }

    private mutating func hex4() -> UInt32? {
        guard at + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Character(Unicode.Scalar(bytes[at])).hexDigitValue else { return nil }
            value = value << 4 | UInt32(digit)
            at += 1
        }
        return value
    }

    /// A string, a plain integer, `true`, `false` or `null`.
    private mutating func skipScalar() -> Bool {
        guard at < bytes.count else { return false }
        switch bytes[at] {
        case UInt8(ascii: "\""): return string() != nil
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return boolean() != nil
        case UInt8(ascii: "n"): return literal("null")
        default: return integer() != nil
        }
    }

    // MARK: Bytes

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard at + count <= bytes.count else { return false }
        for index in 0..<count where bytes[at + index] != word.utf8Start[index] { return false }
        at += count
        return true
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard at < bytes.count, bytes[at] == byte else { return false }
        at += 1
        return true
    }

    private mutating func skipSpace() {
        while at < bytes.count {
            switch bytes[at] {
            case 0x20, 0x09, 0x0A, 0x0D: at += 1
            default: return
            }
        }
    }
}
