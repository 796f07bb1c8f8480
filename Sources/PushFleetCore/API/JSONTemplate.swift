/// A JSON body with template strings, compiled to literal JSON text and holes: a string that is
/// exactly one variable (`"{{id}}"`) takes the value's own JSON type; variables inside a longer
/// string are escaped into it.
public struct JSONTemplate: Sendable, Equatable {
    /// A JSON document as the scenario wrote it, strings being templates.
    public indirect enum Node: Sendable, Equatable {
        case object([(key: String, value: Node)])
        case array([Node])
        case string(Template)
        /// A number, `true`, `false` or `null`, as JSON text.
        case literal(String)

        public static func == (a: Node, b: Node) -> Bool {
            switch (a, b) {
            case (.object(let x), .object(let y)): x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
            case (.array(let x), .array(let y)): x == y
            case (.string(let x), .string(let y)): x == y
            case (.literal(let x), .literal(let y)): x == y
            default: false
            }
        }
    }

    public enum Chunk: Sendable, Equatable {
        case literal(String)
        /// The value in its own type: text as a JSON string, JSON as it is.
        case value(VariableRef)
        /// The value's text escaped inside a JSON string.
        case escaped(VariableRef)
    }

    public var chunks: [Chunk]
    public var root: Node

    public init(_ root: Node) {
        self.root = root
        var chunks: [Chunk] = []
        var pending = ""
        func flush() {
            if !pending.isEmpty { chunks.append(.literal(pending)) }
            pending = ""
        }
        func emit(_ node: Node) {
            switch node {
            case .object(let members):
                pending += "{"
                for (index, member) in members.enumerated() {
                    if index > 0 { pending += "," }
                    pending += JSONText.quoted(member.key) + ":"
                    emit(member.value)
                }
                pending += "}"
            case .array(let items):
                pending += "["
                for (index, item) in items.enumerated() {
                    if index > 0 { pending += "," }
                    emit(item)
                }
                pending += "]"
            case .literal(let text):
                pending += text
            case .string(let template):
                if let whole = template.wholeVariable {
                    flush()
                    chunks.append(.value(whole))
                    return
                }
                pending += "\""
                for part in template.parts {
                    switch part {
                    case .literal(let text): pending += JSONText.escape(text)
                    case .variable(let ref, _):
                        flush()
                        chunks.append(.escaped(ref))
                    }
                }
                pending += "\""
            }
        }
        emit(root)
        flush()
        self.chunks = chunks
    }

    public var variables: [(ref: VariableRef, name: String)] {
        func walk(_ node: Node) -> [(VariableRef, String)] {
            switch node {
            case .object(let members): members.flatMap { walk($0.value) }
            case .array(let items): items.flatMap(walk)
            case .string(let template): template.variables.map { ($0.ref, $0.name) }
            case .literal: []
            }
        }
        return walk(root)
    }

    /// The body's bytes; nil when a variable has no value.
    public func render(_ values: some TemplateValues) -> String? {
        if chunks.count == 1, case .literal(let text) = chunks[0] { return text }
        var out = ""
        for chunk in chunks {
            switch chunk {
            case .literal(let text): out += text
            case .value(let ref):
                guard let value = values.value(of: ref) else { return nil }
                switch value {
                case .text(let text): out += JSONText.quoted(text)
                case .json(let json): out += json
                }
            case .escaped(let ref):
                guard let value = values.value(of: ref) else { return nil }
                out += JSONText.escape(value.string)
            }
        }
        return out
    }
}

/// JSON string escaping.
public enum JSONText {
    public static func quoted(_ text: String) -> String {
        "\"" + escape(text) + "\""
    }

    /// `quoted(text)` appended to `out` without the intermediate strings.
    public static func appendQuoted(_ text: String, to out: inout String) {
        out += "\""
        out += escape(text)
        out += "\""
    }

    public static func escape(_ text: String) -> String {
        // The common case (names, tokens, nonces) needs nothing.
        if isPlain(text) { return text }
        var text = text
        return text.withUTF8(escape(bytes:))
    }

    /// Escapes UTF-8 bytes: a push's body is mostly quotes and plain runs, which are copied whole;
    /// bytes past ASCII are copied as they are (valid UTF-8 stays valid). The length is counted
    /// first, so the string holds no more room than its text.
    private static func escape(bytes: UnsafeBufferPointer<UInt8>) -> String {
        var length = 0
        for byte in bytes { length += escapedLength(byte) }
        return String(unsafeUninitializedCapacity: length) { out in
            var count = 0
            for byte in bytes {
                escaped(byte) { piece in
                    out[count] = piece
                    count += 1
                }
            }
            return count
        }
    }

    /// `bytes` escaped, appended to `out`; a string with nothing to escape is copied whole.
    public static func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        var plainFrom = 0
        for (index, byte) in bytes.enumerated() where escapedLength(byte) > 1 {
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainFrom..<index]))
            escaped(byte) { out.append($0) }
            plainFrom = index + 1
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainFrom...]))
    }

    /// `byte` as JSON writes it in a string, a byte at a time to `put`.
    @inline(__always)
    private static func escaped(_ byte: UInt8, _ put: (UInt8) -> Void) {
        switch escapedLength(byte) {
        case 1:
            put(byte)
        case 2:
            put(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\n"): put(UInt8(ascii: "n"))
            case UInt8(ascii: "\r"): put(UInt8(ascii: "r"))
            case UInt8(ascii: "\t"): put(UInt8(ascii: "t"))
            default: put(byte)
            }
        default:
            let hex: StaticString = "0123456789abcdef"
            put(UInt8(ascii: "\\"))
            put(UInt8(ascii: "u"))
            put(UInt8(ascii: "0"))
            put(UInt8(ascii: "0"))
            put(hex.utf8Start[Int(byte >> 4)])
            put(hex.utf8Start[Int(byte & 0x0F)])
        }
    }

    /// Bytes a byte takes escaped: 2 for a quote, a backslash, `\n`, `\r` or `\t`; 6 for another
    /// control character (`\u00XX`); 1 for the rest.
    private static func escapedLength(_ byte: UInt8) -> Int {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): 2
        case 0..<0x20: 6
        default: 1
        }
    }

    /// Whether `text` needs no escaping, read over its contiguous bytes when it has them: the
    /// servers escape every string of every push's frame and report, and the sequence's
    /// iterator cost more than the check.
    static func isPlain(_ text: String) -> Bool {
        func plain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            for byte in bytes where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return false }
            return true
        }
        if let verdict = text.utf8.withContiguousStorageIfAvailable(plain) { return verdict }
        return !text.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
    }
}
