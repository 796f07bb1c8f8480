/// A dictionary kept as 64 smaller ones, the key's hash choosing which.
///
/// Why: a Swift `Dictionary` grows by rehashing every entry at once. A table with an entry per
/// device, grown on an event loop, stalls that loop for the whole copy: at 393,216 and 786,432
/// devices the reference backend's registrations and the fleet's multiplexed channels took ~0.1 s
/// each, together about half a second in which no device got ready (docs/performance.md, the
/// million-device ramp). Shards grow one at a time, each 1/64 of the copy, at counts spread by
/// chance. A lookup hashes the key twice (once for its shard); the tables that need this are
/// written once per device, read once per push.
public struct ShardedDictionary<Key: Hashable, Value> {
    @usableFromInline var shards: [[Key: Value]]

    public init() {
        shards = Array(repeating: [:], count: ShardIndex.count)
    }

    @inlinable public subscript(key: Key) -> Value? {
        get { shards[ShardIndex.of(key)][key] }
        _modify { yield &shards[ShardIndex.of(key)][key] }
    }

    @inlinable public subscript(key: Key, default defaultValue: @autoclosure () -> Value) -> Value {
        get { shards[ShardIndex.of(key)][key, default: defaultValue()] }
        _modify { yield &shards[ShardIndex.of(key)][key, default: defaultValue()] }
    }

    @inlinable @discardableResult public mutating func removeValue(forKey key: Key) -> Value? {
        shards[ShardIndex.of(key)].removeValue(forKey: key)
    }

    public var count: Int { shards.reduce(0) { $0 + $1.count } }
    public var isEmpty: Bool { shards.allSatisfy(\.isEmpty) }
    /// Entries per shard: how evenly the keys spread.
    public var shardSizes: [Int] { shards.map(\.count) }

    public mutating func removeAll() {
        shards = Array(repeating: [:], count: ShardIndex.count)
    }
}

extension ShardedDictionary: Sequence {
    public typealias Element = (key: Key, value: Value)

    /// Shard by shard; within a shard in its table's order (no order to rely on, as a
    /// dictionary's).
    public func makeIterator() -> FlattenSequence<[[Key: Value]]>.Iterator {
        shards.joined().makeIterator()
    }

    public var underestimatedCount: Int { count }
}

extension ShardedDictionary: Sendable where Key: Sendable, Value: Sendable {}

extension ShardedDictionary: Equatable where Value: Equatable {}

extension ShardedDictionary: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (Key, Value)...) {
        self.init()
        for (key, value) in elements { self[key] = value }
    }
}

/// Which of the 64 tables a key is in, for ``ShardedDictionary`` and ``ShardedSet``.
@usableFromInline enum ShardIndex {
    @usableFromInline static let count = 64

    /// From the top bits of the key's hash: the shard's own table buckets by the low bits of
    /// its own seeded hash.
    @inlinable static func of(_ key: some Hashable) -> Int {
        Int(truncatingIfNeeded: UInt64(UInt(bitPattern: key.hashValue)) >> 58)
    }
}
