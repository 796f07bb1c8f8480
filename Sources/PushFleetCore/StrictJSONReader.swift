/// The pieces of a one-pass JSON reader for the fleet's hot frames (push frames, the push
/// service's reports), without Foundation's `JSONDecoder`.
///
/// It is strict where `JSONDecoder` is, and answers nil for anything it is not sure of (a number
/// with a fraction or an exponent, a nested value where a scalar should be, anything that is not
/// JSON), so a caller falls back to `JSONDecoder` and the answer is the same either way. Unlike
/// `JSONScanner`, which reads backends' answers leniently, it must never accept what
/// `JSONDecoder` refuses.
package struct StrictJSONReader {
    package let bytes: UnsafeBufferPointer<UInt8>
    package var at = 0

    package init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    package var atEnd: Bool { at == bytes.count }

    /// Reads an object's members: `member` is called with each key, the reader just after its
    /// colon, and reads the value (false when it cannot). Nil unless the whole object was read.
    package mutating func object(_ member: (inout StrictJSONReader, String) -> Bool) -> Void? {
        list(open: UInt8(ascii: "{"), close: UInt8(ascii: "}")) { reader in
            guard let name = reader.string() else { return false }
            reader.skipSpace()
            guard reader.take(UInt8(ascii: ":")) else { return false }
            reader.skipSpace()
            return member(&reader, name)
        }
    }

    /// Reads an array's elements with `element` (false when it cannot); nil unless all were read.
    package mutating func array(_ element: (inout StrictJSONReader) -> Bool) -> Void? {
        list(open: UInt8(ascii: "["), close: UInt8(ascii: "]"), element)
    }

    /// An array read into a list by `element` (nil for an element it cannot read); nil unless
    /// all were read. Inlinable, to be specialized for each element type.
    @inlinable
    package mutating func elements<T>(_ element: (inout StrictJSONReader) -> T?) -> [T]? {
        var list: [T] = []
        guard array({ reader in
            guard let value = element(&reader) else { return false }
            list.append(value)
            return true
        }) != nil else { return nil }
        return list
    }

    /// `open`, items separated by commas (each read by `item`), `close`.
    private mutating func list(open: UInt8, close: UInt8, _ item: (inout StrictJSONReader) -> Bool) -> Void? {
        skipSpace()
        guard take(open) else { return nil }
        skipSpace()
        if take(close) { return () }
        repeat {
            skipSpace()
            guard item(&self) else { return nil }
            skipSpace()
        } while take(UInt8(ascii: ","))
        guard take(close) else { return nil }
        return ()
    }

    // MARK: Values

    /// `null` (an absent value), or what `read` reads; nil when neither. Inlinable, so that a
    /// reader in another module gets it specialized rather than looking up `T??`'s metadata
    /// for every field.
    @inlinable
    package mutating func optional<T>(_ read: (inout StrictJSONReader) -> T?) -> T?? {
        if null() { return .some(nil) }
        guard let value = read(&self) else { return nil }
        return .some(value)
    }

    /// Takes `null`; false, taking nothing, for anything else.
    package mutating func null() -> Bool { literal("null") }

    package mutating func boolean() -> Bool? {
        if literal("true") { return true }
        if literal("false") { return false }
        return nil
    }

    /// A plain integer (`-`, then digits without a leading zero) that fits; nil otherwise.
    package mutating func integer() -> Int64? {
        let negative = take(UInt8(ascii: "-"))
        guard let magnitude = digits() else { return nil }
        if negative {
            return magnitude <= UInt64(Int64.max) + 1 ? (magnitude == UInt64(Int64.max) + 1 ? .min : -Int64(magnitude)) : nil
        }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    package mutating func unsigned() -> UInt64? {
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
    package mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = at
        while at < bytes.count {
            let byte = bytes[at]
            if byte == UInt8(ascii: "\"") {
                defer { at += 1 }
                // Validating, not repairing: JSON must be UTF-8, and `JSONDecoder` refuses what is not.
                return String(validating: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
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
                return String(validating: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard at < bytes.count else { return nil }
                let escape = bytes[at]
                at += 1
                if escape == UInt8(ascii: "u") {
                    guard let scalar = unicodeEscape() else { return nil }
                    out.append(contentsOf: String(Character(scalar)).utf8)
                } else {
                    guard let byte = JSONEscape.byte(escape) else { return nil }
                    out.append(byte)
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
        guard let value = Hex.value4(bytes, at: at) else { return nil }
        at += 4
        return value
    }

    /// A string, a plain integer, `true`, `false` or `null`: a member the caller has no use for.
    package mutating func skipScalar() -> Bool {
        guard at < bytes.count else { return false }
        switch bytes[at] {
        case UInt8(ascii: "\""): return skipString()
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return boolean() != nil
        case UInt8(ascii: "n"): return literal("null")
        default: return integer() != nil
        }
    }

    /// A string, as ``string()`` reads it, without making it: plain ASCII is only scanned.
    package mutating func skipString() -> Bool {
        let start = at
        guard take(UInt8(ascii: "\"")) else { return false }
        while at < bytes.count {
            let byte = bytes[at]
            at += 1
            if byte == UInt8(ascii: "\"") { return true }
            if byte < 0x20 { return false }
            if byte >= 0x80 || byte == UInt8(ascii: "\\") {
                at = start
                return string() != nil
            }
        }
        return false
    }

    /// Any value, nested objects and arrays too, to `depth` levels: false for anything this
    /// reader is not sure of (a number with a fraction, deeper nesting), as for what is not JSON.
    package mutating func skipValue(depth: Int = 64) -> Bool {
        skipSpace()
        guard at < bytes.count else { return false }
        switch bytes[at] {
        case UInt8(ascii: "{"):
            guard depth > 0 else { return false }
            return list(open: UInt8(ascii: "{"), close: UInt8(ascii: "}")) { reader in
                guard reader.skipString() else { return false }
                reader.skipSpace()
                guard reader.take(UInt8(ascii: ":")) else { return false }
                return reader.skipValue(depth: depth - 1)
            } != nil
        case UInt8(ascii: "["):
            guard depth > 0 else { return false }
            return array { reader in reader.skipValue(depth: depth - 1) } != nil
        default:
            return skipScalar()
        }
    }

    /// Whether `bytes` are one JSON object and nothing else but white space: true or false where
    /// this reader is sure, nil where `JSONSerialization` must judge.
    package static func isObject(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool? {
        // Escapes (surrogates) and bytes past ASCII (UTF-8's validity) are Foundation's to judge.
        for byte in bytes where byte >= 0x80 || byte == UInt8(ascii: "\\") { return nil }
        var reader = StrictJSONReader(bytes: bytes)
        reader.skipSpace()
        guard reader.at < bytes.count, bytes[reader.at] == UInt8(ascii: "{") else {
            // Not an object (or empty): sure only when the first byte can start no JSON at all.
            return nil
        }
        guard reader.skipValue() else { return nil }
        reader.skipSpace()
        return reader.atEnd ? true : nil
    }

    // MARK: Bytes

    package mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard at + count <= bytes.count else { return false }
        for index in 0..<count where bytes[at + index] != word.utf8Start[index] { return false }
        at += count
        return true
    }

    package mutating func take(_ byte: UInt8) -> Bool {
        guard at < bytes.count, bytes[at] == byte else { return false }
        at += 1
        return true
    }

    package mutating func skipSpace() {
        while at < bytes.count {
            switch bytes[at] {
            case 0x20, 0x09, 0x0A, 0x0D: at += 1
            default: return
            }
        }
    }
}

/// Which of a decoded type's keys have been read, so a repeated key sends the read to
/// `JSONDecoder` (which does not take the last value).
package struct SeenKeys {
    private var bits: UInt64 = 0

    package init() {}

    /// Marks key number `index` (below 64); false when it was seen before.
    package mutating func first(_ index: Int) -> Bool {
        let bit = UInt64(1) << UInt64(index)
        guard bits & bit == 0 else { return false }
        bits |= bit
        return true
    }
}

/// The byte a one-character JSON escape (`\n`, `\"`, …) stands for; nil for `\u` and for
/// what JSON has no escape for.
enum JSONEscape {
    static func byte(_ escape: UInt8) -> UInt8? {
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): escape
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        default: nil
        }
    }
}
