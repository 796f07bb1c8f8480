/// Where the shards of a run meet before a phase (the run's start, the traffic's start): each
/// marks itself ready with its wall-clock time; once all have, every shard computes the same
/// start — the latest mark plus a lead — so their phases begin together. A shard that failed
/// before its mark says so, and the others stop waiting. Pure: the folder it is read from is
/// the caller's business.
public enum ShardBarrier {
    /// A shard's mark.
    public enum Mark: Sendable, Equatable {
        /// Ready at this wall-clock instant (nanoseconds since the Unix epoch).
        case ready(at: Int64)
        /// It stopped before the phase; why.
        case failed(String)
    }

    public enum Decision: Sendable, Equatable {
        /// Not every shard has marked itself yet.
        case wait
        /// Every shard is ready: start at this wall-clock instant.
        case start(atWall: Int64)
        /// A shard failed: the run cannot go on as one.
        case failed(shard: Int, reason: String)
        /// The wait ran out; these shards never marked themselves.
        case timedOut(missing: [Int])
    }

    /// How long after the last mark the phase starts: enough for every shard to read it.
    public static let lead: Int64 = 500_000_000

    /// - Parameters:
    ///   - marks: the marks read so far, by shard index (indices outside `0..<count` are ignored).
    ///   - now, deadline: wall-clock instants; past the deadline a missing mark ends the wait.
    public static func decide(marks: [Int: Mark], count: Int, now: Int64, deadline: Int64) -> Decision {
        var latest = Int64.min
        var missing: [Int] = []
        for index in 0..<count {
            switch marks[index] {
            case .failed(let reason): return .failed(shard: index, reason: reason)
            case .ready(let at): latest = max(latest, at)
            case nil: missing.append(index)
            }
        }
        guard missing.isEmpty else { return now >= deadline ? .timedOut(missing: missing) : .wait }
        return .start(atWall: Saturating.add(latest, lead))
    }

    /// A mark as its file holds it (`ready <ns>` or `failed <reason>`); nil when it is not one.
    public static func mark(parsing text: String) -> Mark? {
        let line = text.split(separator: "\n", maxSplits: 1).first.map(String.init) ?? ""
        if line.hasPrefix("ready "), let at = Int64(line.dropFirst(6)), at > 0 { return .ready(at: at) }
        if line.hasPrefix("failed ") { return .failed(String(line.dropFirst(7).prefix(500))) }
        return nil
    }

    public static func text(of mark: Mark) -> String {
        switch mark {
        case .ready(let at): "ready \(at)\n"
        case .failed(let reason): "failed \(reason.split(separator: "\n").joined(separator: " "))\n"
        }
    }
}
