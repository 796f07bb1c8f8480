/// One problem in a scenario file, located precisely enough to fix without searching.
public struct ScenarioIssue: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    /// Dotted key path, e.g. `traffic[1].rate`.
    public var path: String
    public var message: String
    public var suggestion: String?

    public init(file: String, line: Int, column: Int, path: String, message: String, suggestion: String? = nil) {
        self.file = file
        self.line = line
        self.column = column
        self.path = path
        self.message = message
        self.suggestion = suggestion
    }

    public var description: String {
        var text = "\(file):\(line):\(column): \(path.isEmpty ? "(document)" : path): \(message)"
        if let suggestion { text += " (did you mean '\(suggestion)'?)" }
        return text
    }
}

/// Something in a scenario file that loads and runs but may not mean what it says (a value
/// extracted and never used): `validate` and `run` print it, and it never fails either.
public struct ScenarioWarning: Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    /// Dotted key path, e.g. `api.send.secure.extract.secret_id`.
    public var path: String
    public var message: String
    /// What to write instead, when there is a likely fix.
    public var hint: String?

    public init(file: String, line: Int, column: Int, path: String, message: String, hint: String? = nil) {
        self.file = file
        self.line = line
        self.column = column
        self.path = path
        self.message = message
        self.hint = hint
    }

    public var description: String {
        "\(file):\(line):\(column): warning: \(path): \(message)" + (hint.map { "; \($0)" } ?? "")
    }
}

/// Every problem found in a scenario file; nothing runs while there is one.
public struct ScenarioIssues: Error, Sendable, CustomStringConvertible {
    public var issues: [ScenarioIssue]

    public var description: String {
        issues.map(\.description).joined(separator: "\n")
    }
}

/// The closest candidate within an edit distance that suggests a typo.
func closest(to word: String, in candidates: [String]) -> String? {
    let scored = candidates.map { ($0, editDistance(word.lowercased(), $0.lowercased())) }
    guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(2, word.count / 3) else { return nil }
    return best.0
}

/// Optimal string alignment distance: edits and adjacent transpositions, which are the usual typos.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var d = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in 0...a.count { d[i][0] = i }
    for j in 0...b.count { d[0][j] = j }
    for i in 1...a.count {
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
            }
        }
    }
    return d[a.count][b.count]
}
