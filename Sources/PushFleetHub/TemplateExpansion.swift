public import Foundation
import PushFleetCore

/// Fills a template registration's body with a template send's properties.
///
/// The expression language: `$(prop)` the property's text (empty when absent; names are not
/// case-sensitive), `$(prop, n)` clipped at n characters, `.(prop, n)` clipped with `...` within
/// n, `%(prop)` URI-encoded, `#(prop)` a JSON number when the whole string value is that
/// expression and the text is a number, `'text'`/`"text"` literals, and `{a + b + …}`
/// concatenation. Expressions stand for a whole JSON string value, or a whole XML text node or
/// attribute value; anything else in the body is copied as it is. Values are escaped for where
/// they land (JSON string or XML text).
public enum TemplateExpansion {
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// A template send's body: a JSON object of string properties, keys lower-cased.
    public static func properties(_ data: Data) throws(Failure) -> [String: String] {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw Failure(description: "a template notification's body must be a JSON object of string properties")
        }
        var properties: [String: String] = [:]
        for (key, value) in object {
            guard let text = value as? String else {
                throw Failure(description: "property '\(key)' is not a string; template properties are strings")
            }
            properties[key.lowercased()] = text
        }
        return properties
    }

    /// Expands a JSON or XML template (JSON when it starts with `{` or `[`).
    public static func expand(_ template: String, properties: [String: String]) -> String {
        let trimmed = template.drop { $0.isWhitespace }
        if trimmed.first == "{" || trimmed.first == "[" {
            return expandJSON(template, properties: properties)
        }
        return expandXML(template, properties: properties)
    }

    // MARK: JSON

    static func expandJSON(_ template: String, properties: [String: String]) -> String {
        let scalars = Array(template.unicodeScalars)
        var out = String.UnicodeScalarView()
        var index = 0
        while index < scalars.count {
            guard scalars[index] == "\"" else {
                out.append(scalars[index])
                index += 1
                continue
            }
            // A string literal: find its end, honouring escapes.
            var end = index + 1
            while end < scalars.count, scalars[end] != "\"" {
                end += scalars[end] == "\\" ? 2 : 1
            }
            let raw = String(String.UnicodeScalarView(scalars[index..<min(end + 1, scalars.count)]))
            index = end + 1
            var next = index
            while next < scalars.count, scalars[next] == " " || scalars[next] == "\n" || scalars[next] == "\t" || scalars[next] == "\r" {
                next += 1
            }
            let isKey = next < scalars.count && scalars[next] == ":"
            guard !isKey, let literal = try? JSONDecoder().decode(String.self, from: Data(raw.utf8)),
                let expression = Expression.parse(literal.trimmingCharacters(in: .whitespaces))
            else {
                out.append(contentsOf: raw.unicodeScalars)
                continue
            }
            let value = expression.evaluate(properties)
            if case .function("#", _, _) = expression, isJSONNumber(value) {
                out.append(contentsOf: value.unicodeScalars)
            } else {
                out.append(contentsOf: jsonString(value).unicodeScalars)
            }
        }
        return String(out)
    }

    static func jsonString(_ text: String) -> String {
        let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\\/", with: "/")
    }

    /// JavaScript number syntax, as the documentation gives it.
    static func isJSONNumber(_ text: String) -> Bool {
        text.range(of: #"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"#, options: .regularExpression) != nil
    }

    // MARK: XML

    /// Replaces expressions that make up a whole text node (`>…<`) or attribute value (`"…"`).
    static func expandXML(_ template: String, properties: [String: String]) -> String {
        var out = ""
        var rest = template[...]
        while let open = rest.firstIndex(where: { $0 == ">" || $0 == "\"" || $0 == "'" }) {
            let closer: Character = rest[open] == ">" ? "<" : rest[open]
            out += rest[...open]
            let start = rest.index(after: open)
            guard let close = rest[start...].firstIndex(of: closer) else {
                rest = rest[start...]
                break
            }
            let content = rest[start..<close]
            if let expression = Expression.parse(content.trimmingCharacters(in: .whitespacesAndNewlines)) {
                out += XMLText.escape(expression.evaluate(properties))
            } else {
                out += content
            }
            rest = rest[close...]
            if closer != "<" {
                out.append(closer)
                rest = rest.dropFirst()
            }
        }
        out += rest
        return out
    }

    // MARK: Expressions

    indirect enum Expression: Equatable {
        /// `$`, `.`, `%` or `#` applied to a property, with an optional clip length.
        case function(Character, String, Int?)
        case literal(String)
        case concatenation([Expression])

        static func parse(_ text: String) -> Expression? {
            if text.hasPrefix("{"), text.hasSuffix("}"), text.count >= 2 {
                let inner = text.dropFirst().dropLast()
                var parts: [Expression] = []
                var scanner = Scanner(inner)
                while true {
                    scanner.skipSpaces()
                    guard let term = scanner.term() else { return nil }
                    parts.append(term)
                    scanner.skipSpaces()
                    if scanner.atEnd { break }
                    guard scanner.consume("+") else { return nil }
                }
                return parts.isEmpty ? nil : .concatenation(parts)
            }
            var scanner = Scanner(text[...])
            guard let term = scanner.term(), case .function = term else { return nil }
            scanner.skipSpaces()
            return scanner.atEnd ? term : nil
        }

        func evaluate(_ properties: [String: String]) -> String {
            switch self {
            case .literal(let text):
                return text
            case .concatenation(let parts):
                return parts.map { $0.evaluate(properties) }.joined()
            case .function(let kind, let name, let clip):
                let value = properties[name.lowercased()] ?? ""
                switch kind {
                case "%":
                    return value.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? value
                case ".":
                    guard let clip, value.count > clip else { return value }
                    return String(value.prefix(max(0, clip - 3))) + "..."
                default:
                    guard let clip else { return value }
                    return String(value.prefix(max(0, clip)))
                }
            }
        }
    }

    struct Scanner {
        var text: Substring

        init(_ text: Substring) { self.text = text }

        var atEnd: Bool { text.isEmpty }

        mutating func skipSpaces() { text = text.drop { $0 == " " || $0 == "\t" } }

        mutating func consume(_ prefix: String) -> Bool {
            guard text.hasPrefix(prefix) else { return false }
            text = text.dropFirst(prefix.count)
            return true
        }

        mutating func term() -> Expression? {
            guard let first = text.first else { return nil }
            if first == "'" || first == "\"" || first == "‘" || first == "’" {
                let rest = text.dropFirst()
                let closers: Set<Character> = first == "\"" ? ["\""] : ["'", "’"]
                guard let end = rest.firstIndex(where: { closers.contains($0) }) else { return nil }
                text = rest[rest.index(after: end)...]
                return .literal(String(rest[..<end]))
            }
            guard "$.%#".contains(first), text.dropFirst().first == "(" else { return nil }
            let rest = text.dropFirst(2)
            guard let close = rest.firstIndex(of: ")") else { return nil }
            let arguments = rest[..<close].split(separator: ",", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard let name = arguments.first, !name.isEmpty, name.count <= 256 else { return nil }
            var clip: Int?
            if arguments.count == 2 {
                guard let n = Int(arguments[1]), (0...1_000_000).contains(n) else { return nil }
                clip = n
            }
            text = rest[rest.index(after: close)...]
            return .function(first, name, clip)
        }
    }
}
