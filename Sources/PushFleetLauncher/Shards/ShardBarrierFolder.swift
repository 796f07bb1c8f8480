import Foundation
public import PushFleetCore

/// The shards' barrier (``ShardBarrier``) on a folder they all see (a shared volume): a shard
/// marks itself with a file `<phase>-<index>`, written whole (a temporary file renamed), and
/// reads the others' until the decision is made.
public struct ShardBarrierFolder: Sendable {
    public let folder: String
    public let shard: Shard

    public init(folder: String, shard: Shard) {
        self.folder = folder
        self.shard = shard
    }

    public func mark(_ phase: String, _ mark: ShardBarrier.Mark) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = (folder as NSString).appendingPathComponent("\(phase)-\(shard.index)")
        let temporary = path + ".\(getpid()).tmp"
        try Data(ShardBarrier.text(of: mark).utf8).write(to: URL(fileURLWithPath: temporary))
        _ = try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: temporary, toPath: path)
    }

    /// The marks of `phase` as they stand.
    public func marks(_ phase: String) -> [Int: ShardBarrier.Mark] {
        var marks: [Int: ShardBarrier.Mark] = [:]
        for index in 0..<shard.count {
            let path = (folder as NSString).appendingPathComponent("\(phase)-\(index)")
            guard let data = FileManager.default.contents(atPath: path), data.count < 4096,
                let mark = ShardBarrier.mark(parsing: String(decoding: data, as: UTF8.self))
            else { continue }
            marks[index] = mark
        }
        return marks
    }

    /// Marks this shard ready for `phase` and waits (polling every 100 ms) until every shard is,
    /// one failed, `timeout` passed, or `stopping` says this shard is to stop (then it marks
    /// itself failed, so the others do not wait for it).
    public func meet(_ phase: String, timeout: Duration, stopping: @Sendable () -> Bool = { false }) async -> ShardBarrier.Decision {
        do { try mark(phase, .ready(at: WallClock.nanoseconds())) } catch {
            return .failed(shard: shard.index, reason: "cannot write the barrier mark in \(folder): \(error.localizedDescription)")
        }
        let deadline = Saturating.add(WallClock.nanoseconds(), timeout.nanoseconds)
        while true {
            let decision = ShardBarrier.decide(marks: marks(phase), count: shard.count, now: WallClock.nanoseconds(), deadline: deadline)
            guard decision == .wait else { return decision }
            var stopped = stopping()
            if !stopped {
                do { try await Task.sleep(for: .milliseconds(100)) } catch { stopped = true }
            }
            if stopped {
                let reason = "stopped while waiting for the other shards"
                try? mark(phase, .failed(reason))
                return .failed(shard: shard.index, reason: reason)
            }
        }
    }

    /// What a decision means for a waiting shard, in words.
    public static func describe(_ decision: ShardBarrier.Decision, phase: String) -> String? {
        switch decision {
        case .wait, .start: nil
        case .failed(let shard, let reason): "shard \(shard) failed before the \(phase) barrier: \(reason)"
        case .timedOut(let missing): "shards \(missing.map(String.init).joined(separator: ", ")) never reached the \(phase) barrier"
        }
    }
}
