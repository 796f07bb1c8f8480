import Foundation

/// `/proc/<pid>/status` and its per-thread twin `/proc/<pid>/task/<tid>/status`: lines of a name,
/// a colon and a number (some followed by a unit, `kB`).
enum ProcStatus {
    static func read(_ path: String) -> String? {
        try? String(contentsOfFile: path, encoding: .utf8)
    }

    /// The number after `name` (given with its colon), nil when the line is missing or not a number.
    static func number(_ name: String, in status: String) -> UInt64? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) }),
            let value = line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first
        else { return nil }
        return UInt64(value)
    }
}
