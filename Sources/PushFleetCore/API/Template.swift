import Foundation

/// A text with `{{variable}}` holes, compiled once from the scenario: rendering joins literal
/// pieces and looked-up values, with no parsing per request.
public struct Template: Sendable, Equatable {
    public enum Part: Sendable, Equatable {
        case literal(String)
        case variable(VariableRef, name: String)
    }

    public var parts: [Part]
    /// The text as written, for messages and `validate --explain`.
    public var source: String

    public init(parts: [Part], source: String) {
        self.parts = parts
        self.source = source
    }

    public init(literal: String) {
        self.parts = literal.isEmpty ? [] : [.literal(literal)]
        self.source = literal
    }

    /// The single variable the whole template is, if it is exactly one (`"{{id}}"`).
    public var wholeVariable: VariableRef? {
        if parts.count == 1, case .variable(let ref, _) = parts[0] { return ref }
        return nil
    }

    public var variables: [(ref: VariableRef, name: String)] {
        parts.compactMap { part in
            if case .variable(let ref, let name) = part { return (ref, name) }
            return nil
        }
    }

    /// Renders with each value passed through `encode` (percent-encoding, JSON escaping …);
    /// nil when a variable has no value.
    public func render(_ values: some TemplateValues, encode: (String) -> String = { $0 }) -> String? {
        if parts.count == 1, case .literal(let text) = parts[0] { return text }
        var out = ""
        for part in parts {
            switch part {
            case .literal(let text): out += text
            case .variable(let ref, _):
                guard let value = values.value(of: ref) else { return nil }
                out += encode(value.string)
            }
        }
        return out
    }

    /// The largest template accepted: a request's body is sent whole, and anything near this
    /// size is a mistake in the description rather than a request a backend expects.
    public static let maxSourceBytes = 1 << 20

    /// Splits `text` at `{{…}}`; `resolve` names each variable's source, or says why it cannot.
    /// One pass over the bytes: time is linear in the text, whatever the number of variables.
    public static func parse(
        _ text: String, resolve: (String) -> Result<VariableRef, TemplateError>
    ) -> Result<Template, TemplateError> {
        let bytes = Array(text.utf8)
        guard bytes.count <= maxSourceBytes else {
            return .failure(TemplateError("a template of \(bytes.count.grouped) bytes; at most \(maxSourceBytes.grouped) bytes"))
        }
        let open = UInt8(ascii: "{")
        let close = UInt8(ascii: "}")
        var parts: [Part] = []
        var literalStart = 0
        var index = 0
        while index + 1 < bytes.count {
            guard bytes[index] == open, bytes[index + 1] == open else {
                index += 1
                continue
            }
            var end = index + 2
            while end + 1 < bytes.count, !(bytes[end] == close && bytes[end + 1] == close) { end += 1 }
            guard end + 1 < bytes.count else { return .failure(TemplateError("'{{' without a closing '}}'")) }
            if index > literalStart { parts.append(.literal(String(decoding: bytes[literalStart..<index], as: UTF8.self))) }
            let name = String(decoding: bytes[(index + 2)..<end], as: UTF8.self).trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty else { return .failure(TemplateError("empty '{{}}'")) }
            switch resolve(name) {
            case .success(let ref): parts.append(.variable(ref, name: name))
            case .failure(let error): return .failure(error)
            }
            index = end + 2
            literalStart = index
        }
        if literalStart < bytes.count { parts.append(.literal(String(decoding: bytes[literalStart...], as: UTF8.self))) }
        return .success(Template(parts: parts, source: text))
    }

}

/// Why a template or a value in it is unusable.
public struct TemplateError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    /// A name the user may have meant.
    public var suggestion: String?

    public init(_ message: String, suggestion: String? = nil) {
        self.message = message
        self.suggestion = suggestion
    }

    public var description: String { message }
}

/// Looks up what a template's variables stand for in one request.
public protocol TemplateValues {
    func value(of ref: VariableRef) -> APIValue?
}

/// Percent-encoding of values put into a URL.
public enum PercentEncoding {
    /// RFC 3986 unreserved characters: everything else in a value is encoded, so a user named
    /// `bob&x=1` or `a/b` stays one query value or one path segment.
    @inline(__always)
    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// Encodes every byte that is not unreserved.
    public static func component(_ text: String) -> String {
        // Most values (user names, hex tokens, ids) need nothing: skip the copy.
        if text.utf8.allSatisfy(isUnreserved) { return text }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count * 3)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                bytes.append(byte)
            } else {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
