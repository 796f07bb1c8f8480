/// The string a JSON text holds when that text is one string with no escape in it (JSON's
/// whitespace around it allowed), read straight from its bytes; nil for any other text, which
/// `JSONDecoder` then reads or refuses as before. A secure send's body is such a string: decoding it
/// with `JSONDecoder` cost ~1.5% of `serve`'s CPU per secure push (docs/performance-delivery.md).
///
/// Hand-written rather than a JSON library's because it is a strict subset: between the quotes
/// every byte is taken as it is, so the answer is `JSONDecoder`'s whenever it is not nil
/// (checked against it by a property test and the parsers' fuzz target).
public enum PlainJSONString {
    public static func read(_ bytes: UnsafeRawBufferPointer) -> String? {
        var start = 0
        var end = bytes.count
        while start < end, isWhitespace(bytes[start]) { start += 1 }
        while end > start, isWhitespace(bytes[end - 1]) { end -= 1 }
        guard end - start >= 2, bytes[start] == quote, bytes[end - 1] == quote else { return nil }
        let inner = UnsafeRawBufferPointer(rebasing: bytes[(start + 1)..<(end - 1)])
        // A quote inside would end the string early; a backslash starts an escape; control
        // characters are not allowed unescaped.
        for byte in inner where byte < 0x20 || byte == quote || byte == backslash { return nil }
        return String(validating: inner, as: UTF8.self)
    }

    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    /// JSON's whitespace: space, tab, line feed, carriage return.
    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }
}
