/// A set kept as 64 smaller ones, for the reason ``ShardedDictionary`` gives.
public struct ShardedSet<Element: Hashable> {
    @usableFromInline var shards: [Set<Element>]

    public init() {
        shards = Array(repeating: [], count: ShardIndex.count)
    }

    public init<S: Sequence>(_ elements: S) where S.Element == Element {
        self.init()
        for element in elements { insert(element) }
    }

    @inlinable @discardableResult public mutating func insert(_ element: Element) -> Bool {
        shards[ShardIndex.of(element)].insert(element).inserted
    }

    @inlinable @discardableResult public mutating func remove(_ element: Element) -> Element? {
        shards[ShardIndex.of(element)].remove(element)
    }

    @inlinable public func contains(_ element: Element) -> Bool {
        shards[ShardIndex.of(element)].contains(element)
    }

    public var count: Int { shards.reduce(0) { $0 + $1.count } }
    public var isEmpty: Bool { shards.allSatisfy(\.isEmpty) }

    public mutating func removeAll() {
        shards = Array(repeating: [], count: ShardIndex.count)
    }
}

extension ShardedSet: Sequence {
    public func makeIterator() -> FlattenSequence<[Set<Element>]>.Iterator {
        shards.joined().makeIterator()
    }

    public var underestimatedCount: Int { count }
}

extension ShardedSet: Sendable where Element: Sendable {}

extension ShardedSet: Equatable {
    /// The same elements: each element's shard is fixed by its hash, so shard by shard.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.shards == rhs.shards }
}

extension ShardedSet: ExpressibleByArrayLiteral {
    public init(arrayLiteral elements: Element...) { self.init(elements) }
}
