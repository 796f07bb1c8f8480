/// Text for an XML or HTML text node or attribute value, either quote kind: the one escaper of
/// the reports, the hub's documents and the backend's toasts.
public enum XMLText {
    public static func escape(_ text: String) -> String {
        // The common case (names, tokens, figures) needs nothing.
        if !text.utf8.contains(where: { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: ">") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "'") }) {
            return text
        }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(character)
            }
        }
        return out
    }
}
