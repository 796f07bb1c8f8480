import Foundation

/// h2load (Debian's nghttp2-client): one run, bounded in time, and the figures of its summary.
enum H2Load {
    /// What a run's summary says: requests done, those answered 2xx, and the run's own length.
    struct Summary {
        var done: Int
        var succeeded: Int
        var seconds: Double?

        /// Reads h2load's summary lines; nil when it printed none (it did not run to its end).
        init?(_ output: String) {
            func number(after marker: String, in line: Substring?) -> Int {
                guard let line, let range = line.range(of: marker) else { return 0 }
                return Int(line[..<range.lowerBound].split(separator: " ").last ?? "") ?? 0
            }
            let lines = output.split(separator: "\n")
            guard let requests = lines.first(where: { $0.hasPrefix("requests:") }) else { return nil }
            let status = lines.first { $0.hasPrefix("status codes:") }
            let finished = lines.first { $0.hasPrefix("finished in") }
            done = number(after: " done", in: requests)
            succeeded = number(after: " 2xx", in: status)
            seconds = finished.flatMap { line in Double(line.dropFirst("finished in ".count).prefix { $0 != "s" && $0 != "," }) }
        }
    }

    /// Runs h2load to its end, or until `limit`: coreutils' timeout bounds the run whatever the
    /// tool waits for.
    static func run(_ path: String, _ arguments: [String], limit: Duration) async throws -> String {
        try await ReferenceTool.run("/usr/bin/env", ["timeout", "-s", "KILL", "\(max(1, limit.components.seconds))", path] + arguments).output
    }
}
