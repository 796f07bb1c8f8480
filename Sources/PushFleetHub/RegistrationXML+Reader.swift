import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

extension RegistrationXML {
    /// The parser events of a registration, gathered: the description element, its members in
    /// document order, and the first problem found.
    final class Reader: NSObject, XMLParserDelegate {
        struct Member {
            var name: String
            var text = ""
            var isNil = false
            var headers: [HubRegistration.Header] = []
        }

        var descriptionName: String?
        var members: [Member] = []
        var failure: String?
        private var depth = 0
        private var descriptionDepth: Int?
        private var rootIsEntry = false
        private var contentDepth: Int?
        private var current: Member?
        private var headerName = ""
        private var headerValue = ""
        private var headerField: String?
        private var text = ""

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            depth += 1
            guard depth <= 16 else {
                failure = "XML nested too deeply"
                parser.abortParsing()
                return
            }
            if descriptionDepth == nil {
                if let problem = placement(name, namespace: namespaceURI ?? "") {
                    failure = problem
                    parser.abortParsing()
                } else if name.hasSuffix("RegistrationDescription") {
                    descriptionName = name
                    descriptionDepth = depth
                }
                return
            }
            guard let base = descriptionDepth else { return }
            switch depth - base {
            case 1:
                let isNil = attributes.contains { ($0.key == "nil" || $0.key.hasSuffix(":nil")) && $0.value == "true" }
                // A member of another namespace is not one of the description's: ignored as unknown.
                current = Member(name: namespaceURI == hubNamespace ? name : "{\(namespaceURI ?? "")}\(name)", isNil: isNil)
                text = ""
            case 3:
                headerField = name
                text = ""
            default:
                break
            }
        }

        /// Where the description may be, as the service reads it: an Atom `entry` whose Atom
        /// `content` holds it, or the description alone; in the hub's namespace either way.
        private func placement(_ name: String, namespace: String) -> String? {
            if depth == 1 {
                rootIsEntry = name == "entry"
                if rootIsEntry {
                    return namespace == atomNamespace ? nil : "entry must be in the Atom namespace \(atomNamespace)"
                }
                guard name.hasSuffix("RegistrationDescription") else { return "the document must be an Atom entry, not \(name.prefix(60))" }
            } else if depth == 2, rootIsEntry, name == "content" {
                guard namespace == atomNamespace else { return "content must be in the Atom namespace \(atomNamespace)" }
                contentDepth = depth
                return nil
            }
            guard name.hasSuffix("RegistrationDescription") else { return nil }
            if rootIsEntry, contentDepth == nil || depth != 3 {
                return "\(name.prefix(60)) must be the content of the Atom entry"
            }
            return namespace == hubNamespace ? nil : "\(name.prefix(60)) must be in the namespace \(hubNamespace)"
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            text += string
            if text.utf8.count > 1 << 20 {
                failure = "element text over 1 MiB"
                parser.abortParsing()
            }
        }

        func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
            text += String(decoding: CDATABlock, as: UTF8.self)
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            defer { depth -= 1 }
            guard let base = descriptionDepth, depth > base else {
                if descriptionDepth == depth { descriptionDepth = -1000 }
                return
            }
            switch depth - base {
            case 1:
                if var member = current {
                    if member.headers.isEmpty { member.text = text }
                    members.append(member)
                    guard members.count <= 64 else {
                        failure = "too many elements in the registration description"
                        parser.abortParsing()
                        return
                    }
                }
                current = nil
            case 2:
                if !headerName.isEmpty {
                    current?.headers.append(.init(headerName, headerValue))
                    if (current?.headers.count ?? 0) > 32 {
                        failure = "too many headers in the template"
                        parser.abortParsing()
                    }
                }
                headerName = ""
                headerValue = ""
            case 3:
                if headerField == "Header" { headerName = text.trimmingCharacters(in: .whitespacesAndNewlines) }
                if headerField == "Value" { headerValue = text }
                headerField = nil
            default:
                break
            }
        }
    }
}
