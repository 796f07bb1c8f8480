import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// Whether a WNS visual payload is well-formed XML, as WNS requires before it accepts one.
///
/// libxml2 (through `XMLParser`) does the parsing; on its own it reports success for an
/// unclosed root or trailing content, so one root element opened and closed is also required.
/// A DTD is refused: WNS's schemas have none, and entities would let 5,000 bytes expand.
enum WellFormedXML {
    /// Nil when `data` is one well-formed XML document without a DTD, else what is wrong.
    static func problem(in data: Data) -> String? {
        guard String(validating: data, as: UTF8.self) != nil else { return "not UTF-8" }
        if data.range(of: Data("<!DOCTYPE".utf8)) != nil { return "a DTD is not allowed" }
        let parser = XMLParser(data: data)
        let reader = Reader()
        parser.delegate = reader
        let parsed = parser.parse()
        if let error = parser.parserError ?? (parsed ? nil : CocoaError(.coderReadCorrupt)) {
            let line = parser.lineNumber
            return "libxml2 error \((error as NSError).code) at line \(line), column \(parser.columnNumber)"
        }
        guard reader.roots == 1, reader.depth == 0 else {
            return reader.roots > 1 ? "more than one root element" : "no complete root element"
        }
        return nil
    }

    private final class Reader: NSObject, XMLParserDelegate {
        var depth = 0
        var roots = 0

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName qName: String?,
            attributes attributeDict: [String: String] = [:]
        ) {
            if depth == 0 { roots += 1 }
            depth += 1
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
            depth -= 1
        }
    }
}
