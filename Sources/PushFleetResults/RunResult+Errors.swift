extension RunResult {
    /// The run's error classes in one line, for a message that says a run went wrong without its
    /// reports at hand (a bench's failure, the run's summary): each class with its count and the traffic seconds it
    /// spanned, the most frequent first, at most `limit` classes and how many more there were.
    /// Nil when the run recorded no error.
    public func errorsLine(limit: Int = 5) -> String? {
        guard !errors.isEmpty else { return nil }
        let ordered = errors.sorted { ($0.count, $1.errorClass) > ($1.count, $0.errorClass) }
        var parts = ordered.prefix(max(1, limit)).map { row in
            let seconds = row.firstSecond == row.lastSecond ? "s \(row.firstSecond)" : "s \(row.firstSecond)–\(row.lastSecond)"
            return "\(row.errorClass) ×\(row.count) (\(seconds))"
        }
        if ordered.count > parts.count { parts.append("\(ordered.count - parts.count) more classes") }
        return parts.joined(separator: ", ")
    }
}
