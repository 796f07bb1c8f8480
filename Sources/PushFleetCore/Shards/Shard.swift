/// One of K processes that together play one scenario: shard `index` of `count` owns every
/// device whose plan index is `index` modulo `count`, and every send whose number in its
/// sender's schedule is `index` modulo `count`. The K slices of the same plan and seed are
/// disjoint and their union is exactly the single-process plan (the schedule is interleaved,
/// as k6's execution segments are, so every shard carries a fair share of every stage).
public struct Shard: Sendable, Equatable, CustomStringConvertible {
    public let index: Int
    public let count: Int

    /// Most shards one run may have: beyond it a slice is smaller than the barrier's cost.
    public static let maxCount = 1024

    public struct InvalidShard: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    public init(index: Int, count: Int) throws(InvalidShard) {
        guard (1...Self.maxCount).contains(count) else {
            throw InvalidShard(description: "the shard count must be 1…\(Self.maxCount), not \(count)")
        }
        guard (0..<count).contains(index) else {
            throw InvalidShard(description: "the shard index must be 0…\(count - 1) for \(count) shards, not \(index)")
        }
        self.index = index
        self.count = count
    }

    /// `i/K`, as `--shard` takes it (`0/4` … `3/4`).
    public init(parsing text: String) throws(InvalidShard) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else {
            throw InvalidShard(description: "'\(text)' is not a shard: write INDEX/COUNT, e.g. 0/4 (indices count from 0)")
        }
        try self.init(index: index, count: count)
    }

    /// The whole plan in one process.
    public static let whole = try! Shard(index: 0, count: 1)

    public var isWhole: Bool { count == 1 }

    public var description: String { "\(index)/\(count)" }

    /// The device with this plan index is played here.
    public func owns(device: Int) -> Bool { device % count == index }

    /// The send with this number in its sender's schedule is made here.
    public func owns(send number: Int) -> Bool { number % count == index }

    /// This shard's part of a limit shared by the whole run (a sender's `max_in_flight`),
    /// at least 1, the parts adding up to the whole.
    public func share(of limit: Int) -> Int {
        max(1, limit / count + (index < limit % count ? 1 : 0))
    }

    /// Send ids made here are unique across the shards of a run: the n-th (from 1) is
    /// `(n - 1) × count + index + 1`.
    public func sendID(_ local: Int) -> Int {
        (local - 1) * count + index + 1
    }

    /// The shard that made the send with this id (the inverse of ``sendID(_:)``).
    public static func index(ofSend id: Int, count: Int) -> Int {
        ((id - 1) % count + count) % count
    }

    /// The folder a shard writes inside the run's shared results folder.
    public var folderName: String { "shard-\(index)-of-\(count)" }

    /// Reads a shard folder's name back (`shard-2-of-4`).
    public init?(folderName name: Substring) {
        let parts = name.split(separator: "-")
        guard parts.count == 4, parts[0] == "shard", parts[2] == "of", let index = Int(parts[1]), let count = Int(parts[3]),
            let shard = try? Shard(index: index, count: count)
        else { return nil }
        self = shard
    }
}
