/// The W3C `traceparent` grammar for version 00, written apart from the code that makes the
/// header: lower-case hex, no all-zero id, the sampled flag set.
package enum TraceParentGrammar {
    package static func isValid(_ header: String) -> Bool {
        let parts = header.split(separator: "-", omittingEmptySubsequences: false)
        guard header.utf8.count == 55, parts.count == 4, parts[0] == "00", parts[3] == "01" else { return false }
        let hex = { (part: Substring, count: Int) in part.count == count && part.allSatisfy { "0123456789abcdef".contains($0) } }
        return hex(parts[1], 32) && hex(parts[2], 16) && parts[1].contains { $0 != "0" } && parts[2].contains { $0 != "0" }
    }
}
