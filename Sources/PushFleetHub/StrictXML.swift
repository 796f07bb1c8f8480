public import Foundation

/// A strict check that a document is well-formed XML 1.0 with well-formed namespaces, run
/// before the registration reader sees it: any error refuses the document.
///
/// Why by hand: Foundation's `XMLParser` on Linux is libxml2 in recovery mode, which repairs
/// cut-off end tags, text after the root and undeclared prefixes and reports success; the
/// Swift toolchain ships no libxml2 headers to drive it without recovery, and a registration
/// needs only the DTD-free subset of XML. The checker is pure (characters in, failure or
/// document out): a scanner whose state is where it is in the document — prolog, inside the
/// root with its open elements and their namespace scopes, or after the root.
///
/// Refused: a DTD (`<!DOCTYPE`, in any encoding: the bytes are decoded first), references to
/// entities other than the five predefined ones, characters XML does not allow, and the
/// encodings other than UTF-8, UTF-16, UTF-32, ISO-8859-1 and US-ASCII.
public enum StrictXML {
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// Open elements at most (the registration reader allows far fewer).
    public static let maxDepth = 64
    public static let maxAttributes = 64
    static let predefinedEntities: [String: Unicode.Scalar] = ["lt": "<", "gt": ">", "amp": "&", "apos": "'", "quot": "\""]
    static let xmlNamespace = "http://www.w3.org/XML/1998/namespace"
    static let xmlnsNamespace = "http://www.w3.org/2000/xmlns/"

    /// Checks `data` and returns the same document as UTF-8 without its XML declaration, so a
    /// parser after this one reads exactly the characters that were checked.
    public static func utf8Document(_ data: Data) throws(Failure) -> Data {
        let scalars = try decode(data)
        var checker = Checker(scalars)
        try checker.run()
        var text = String.UnicodeScalarView()
        text.append(contentsOf: scalars[checker.bodyStart...])
        return Data(String(text).utf8)
    }

    struct Checker {
        private let text: [Unicode.Scalar]
        private var index = 0
        /// Where the document begins after the XML declaration.
        private(set) var bodyStart = 0
        /// Open elements: their qualified names and the prefixes they declare.
        private var open: [(name: String, declared: [String: String])] = []

        init(_ text: [Unicode.Scalar]) {
            self.text = text
        }

        mutating func run() throws(Failure) {
            try xmlDeclaration()
            bodyStart = index
            try misc()
            guard peek("<"), !peek("</") else { throw Failure("no root element") }
            try element()
            try misc()
            guard index == text.count else {
                throw Failure(peek("<") ? "a second root element" : "text after the root element")
            }
        }

        // MARK: Prolog and epilog

        private mutating func xmlDeclaration() throws(Failure) {
            guard peek("<?xml"), index + 5 < text.count, isSpace(text[index + 5]) else { return }
            index += 5
            var names: [String] = []
            while true {
                let hadSpace = skipSpace()
                if consume("?>") { break }
                guard hadSpace else { throw Failure("malformed XML declaration") }
                let name = try self.name()
                try equals()
                let value = try quoted(allowReferences: false)
                switch name {
                case "version":
                    guard names.isEmpty, value.hasPrefix("1."), value.count > 2, value.dropFirst(2).allSatisfy(\.isNumber) else {
                        throw Failure("malformed XML declaration version")
                    }
                case "encoding":
                    guard names == ["version"], let first = value.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic,
                        value.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)) })
                    else { throw Failure("malformed XML declaration encoding") }
                case "standalone":
                    guard names.first == "version", !names.contains("standalone"), value == "yes" || value == "no" else {
                        throw Failure("malformed XML declaration standalone")
                    }
                default:
                    throw Failure("unknown XML declaration field '\(name.prefix(40))'")
                }
                names.append(name)
            }
            guard names.first == "version" else { throw Failure("the XML declaration needs a version") }
        }

        /// Comments, processing instructions and white space around the root element.
        private mutating func misc() throws(Failure) {
            while index < text.count {
                if isSpace(text[index]) {
                    index += 1
                } else if peek("<!--") {
                    try comment()
                } else if peek("<?") {
                    try processingInstruction()
                } else if peek("<!") {
                    let rest = String(String.UnicodeScalarView(text[index..<min(text.count, index + 9)]))
                    if rest.uppercased() == "<!DOCTYPE" { throw Failure("a DTD is not allowed") }
                    throw Failure("markup '<!' is not allowed here")
                } else {
                    return
                }
            }
        }

        private mutating func comment() throws(Failure) {
            index += 4
            while index < text.count {
                if peek("--") {
                    guard peek("-->") else { throw Failure("'--' inside a comment") }
                    index += 3
                    return
                }
                try char(text[index])
                index += 1
            }
            throw Failure("a comment is not closed")
        }

        private mutating func processingInstruction() throws(Failure) {
            index += 2
            let target = try name()
            guard target.lowercased() != "xml" else { throw Failure("an XML declaration is only allowed at the very start") }
            guard !target.contains(":") else { throw Failure("a processing instruction's target may not contain ':'") }
            if consume("?>") { return }
            guard skipSpace() else { throw Failure("malformed processing instruction") }
            while index < text.count {
                if consume("?>") { return }
                try char(text[index])
                index += 1
            }
            throw Failure("a processing instruction is not closed")
        }

        // MARK: Elements

        private mutating func element() throws(Failure) {
            guard open.count < maxDepth else { throw Failure("elements nested deeper than \(maxDepth)") }
            index += 1
            let qualified = try name()
            var attributes: [(name: String, value: String)] = []
            var declared: [String: String] = [:]
            var empty = false
            while true {
                let hadSpace = skipSpace()
                if consume("/>") {
                    empty = true
                    break
                }
                if consume(">") { break }
                guard hadSpace, index < text.count else { throw Failure("malformed start tag <\(qualified.prefix(40))>") }
                let attribute = try name()
                try equals()
                let value = try quoted(allowReferences: true)
                guard !attributes.contains(where: { $0.name == attribute }) else {
                    throw Failure("attribute '\(attribute.prefix(40))' given twice")
                }
                guard attributes.count < maxAttributes else { throw Failure("more than \(maxAttributes) attributes") }
                attributes.append((attribute, value))
                if attribute == "xmlns" {
                    guard value != StrictXML.xmlNamespace, value != StrictXML.xmlnsNamespace else { throw Failure("a reserved namespace made the default") }
                    declared[""] = value
                } else if attribute.hasPrefix("xmlns:") {
                    let prefix = String(attribute.dropFirst(6))
                    guard !prefix.isEmpty, !prefix.contains(":") else { throw Failure("'\(attribute.prefix(40))' is not a namespace declaration") }
                    guard !value.isEmpty else { throw Failure("prefix '\(prefix.prefix(40))' declared with an empty namespace") }
                    guard prefix != "xmlns", (prefix == "xml") == (value == StrictXML.xmlNamespace), value != StrictXML.xmlnsNamespace else {
                        throw Failure("a reserved prefix or namespace declared")
                    }
                    declared[prefix] = value
                }
            }
            open.append((qualified, declared))
            // Names resolve once the element's own declarations are in scope.
            _ = try resolve(qualified, isAttribute: false)
            var expanded = Set<String>()
            for attribute in attributes where attribute.name != "xmlns" && !attribute.name.hasPrefix("xmlns:") {
                let namespace = try resolve(attribute.name, isAttribute: true)
                let local = attribute.name.split(separator: ":").last.map(String.init) ?? attribute.name
                guard expanded.insert("\(namespace ?? "")|\(local)").inserted else {
                    throw Failure("attribute '\(attribute.name.prefix(40))' given twice by namespace")
                }
            }
            if empty {
                open.removeLast()
                return
            }
            try content()
        }

        /// The namespace a qualified name is in; an undeclared prefix is an error.
        private func resolve(_ qualified: String, isAttribute: Bool) throws(Failure) -> String? {
            let parts = qualified.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2, parts.allSatisfy({ !$0.isEmpty }) else { throw Failure("'\(qualified.prefix(40))' is not a qualified name") }
            let prefix = parts.count == 2 ? String(parts[0]) : nil
            guard let prefix else {
                return isAttribute ? nil : open.reversed().lazy.compactMap { $0.declared[""] }.first.flatMap { $0.isEmpty ? nil : $0 }
            }
            if prefix == "xml" { return StrictXML.xmlNamespace }
            guard prefix != "xmlns", let namespace = open.reversed().lazy.compactMap({ $0.declared[prefix] }).first else {
                throw Failure("namespace prefix '\(prefix.prefix(40))' is not declared")
            }
            return namespace
        }

        private mutating func content() throws(Failure) {
            while index < text.count {
                let scalar = text[index]
                if scalar == "<" {
                    if peek("</") {
                        index += 2
                        let name = try self.name()
                        _ = skipSpace()
                        guard consume(">") else { throw Failure("malformed end tag </\(name.prefix(40))>") }
                        guard let top = open.popLast(), top.name == name else {
                            throw Failure("end tag </\(name.prefix(40))> does not match the open element")
                        }
                        return
                    } else if peek("<!--") {
                        try comment()
                    } else if peek("<![CDATA[") {
                        index += 9
                        while !peek("]]>") {
                            guard index < text.count else { throw Failure("a CDATA section is not closed") }
                            try char(text[index])
                            index += 1
                        }
                        index += 3
                    } else if peek("<?") {
                        try processingInstruction()
                    } else if peek("<!") {
                        throw Failure("markup '<!' is not allowed in content")
                    } else {
                        try element()
                    }
                } else if scalar == "&" {
                    _ = try reference()
                } else {
                    if peek("]]>") { throw Failure("']]>' in text") }
                    try char(scalar)
                    index += 1
                }
            }
            throw Failure("element <\(open.last?.name.prefix(40) ?? "")> is not closed")
        }

        // MARK: Pieces

        /// `&name;` (one of the five predefined), `&#N;` or `&#xH;` naming an allowed character.
        private mutating func reference() throws(Failure) -> Unicode.Scalar {
            index += 1
            if consume("#") {
                let hex = consume("x")
                var digits = ""
                while index < text.count, text[index] != ";", digits.count <= 8 {
                    digits.unicodeScalars.append(text[index])
                    index += 1
                }
                guard consume(";"), let value = UInt32(digits, radix: hex ? 16 : 10), let scalar = Unicode.Scalar(value), Self.isChar(scalar)
                else { throw Failure("malformed character reference") }
                return scalar
            }
            let name = try self.name()
            guard consume(";"), let scalar = StrictXML.predefinedEntities[name] else {
                throw Failure("reference to undefined entity '\(name.prefix(40))' (a bare '&' must be written &amp;)")
            }
            return scalar
        }

        private mutating func quoted(allowReferences: Bool) throws(Failure) -> String {
            guard index < text.count, text[index] == "\"" || text[index] == "'" else { throw Failure("an attribute value must be quoted") }
            let quote = text[index]
            index += 1
            var value = String.UnicodeScalarView()
            while index < text.count, text[index] != quote {
                let scalar = text[index]
                if scalar == "<" { throw Failure("'<' in an attribute value") }
                if scalar == "&" {
                    guard allowReferences else { throw Failure("'&' in the XML declaration") }
                    value.append(try reference())
                    continue
                }
                try char(scalar)
                value.append(scalar)
                index += 1
            }
            guard index < text.count else { throw Failure("an attribute value is not closed") }
            index += 1
            return String(value)
        }

        private mutating func equals() throws(Failure) {
            _ = skipSpace()
            guard consume("=") else { throw Failure("'=' expected after an attribute name") }
            _ = skipSpace()
        }

        private mutating func name() throws(Failure) -> String {
            guard index < text.count, Self.isNameStart(text[index]) else { throw Failure("a name was expected") }
            var name = String.UnicodeScalarView()
            while index < text.count, Self.isNameChar(text[index]) {
                name.append(text[index])
                index += 1
                guard name.count <= 1024 else { throw Failure("a name longer than 1024 characters") }
            }
            return String(name)
        }

        private func char(_ scalar: Unicode.Scalar) throws(Failure) {
            guard Self.isChar(scalar) else { throw Failure("character U+\(String(scalar.value, radix: 16, uppercase: true)) is not allowed in XML") }
        }

        @discardableResult
        private mutating func skipSpace() -> Bool {
            let start = index
            while index < text.count, isSpace(text[index]) { index += 1 }
            return index > start
        }

        private func isSpace(_ scalar: Unicode.Scalar) -> Bool {
            scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r"
        }

        private func peek(_ literal: String) -> Bool {
            var position = index
            for scalar in literal.unicodeScalars {
                guard position < text.count, text[position] == scalar else { return false }
                position += 1
            }
            return true
        }

        private mutating func consume(_ literal: String) -> Bool {
            guard peek(literal) else { return false }
            index += literal.unicodeScalars.count
            return true
        }

        // MARK: Character classes (XML 1.0 fifth edition §2.2, §2.3)

        static func isChar(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar.value {
            case 0x9, 0xA, 0xD, 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: true
            default: false
            }
        }

        static func isNameStart(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar.value {
            case 0x3A, 0x41...0x5A, 0x5F, 0x61...0x7A, 0xC0...0xD6, 0xD8...0xF6, 0xF8...0x2FF, 0x370...0x37D, 0x37F...0x1FFF,
                0x200C...0x200D, 0x2070...0x218F, 0x2C00...0x2FEF, 0x3001...0xD7FF, 0xF900...0xFDCF, 0xFDF0...0xFFFD, 0x10000...0xEFFFF:
                true
            default: false
            }
        }

        static func isNameChar(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar.value {
            case 0x2D, 0x2E, 0x30...0x39, 0xB7, 0x300...0x36F, 0x203F...0x2040: true
            default: isNameStart(scalar)
            }
        }
    }
}
