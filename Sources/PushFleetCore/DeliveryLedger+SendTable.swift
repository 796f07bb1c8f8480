extension DeliveryLedger {
    /// The run's sends by id. A run numbers its sends 1, 2, 3… (a shard I of K: I, I+K, I+2K…,
    /// ``spaced(stride:offset:)``), so they sit in an array at their number: a dictionary would
    /// cost about twice the bytes per send, and a ledger holds every send of the run. An id off
    /// that pattern (a merged or hand-made ledger) is kept aside in a dictionary.
    public struct SendTable: Sendable {
        private var slots: [Send?] = []
        private var aside: [Int: Send] = [:]
        private var stride = 1
        private var offset = 0
        public private(set) var count = 0

        public init() {}

        /// A table for ids offset+1, offset+1+stride, …
        public static func spaced(stride: Int, offset: Int) -> Self {
            var table = Self()
            table.stride = max(1, stride)
            table.offset = max(0, offset)
            return table
        }

        /// The slot of `id`, when it follows the pattern and is not absurdly far ahead (an id
        /// far past what is stored would allocate every slot before it).
        private func slot(_ id: Int) -> Int? {
            let relative = id &- 1 &- offset
            guard relative >= 0, relative % stride == 0 else { return nil }
            let index = relative / stride
            return index <= slots.count + 65_536 ? index : nil
        }

        public subscript(id: Int) -> Send? {
            get {
                if let index = slot(id), index < slots.count, let send = slots[index] { return send }
                return aside[id]
            }
            set {
                let old = self[id]
                if let index = slot(id) {
                    if index >= slots.count {
                        guard newValue != nil else { return }
                        slots.append(contentsOf: repeatElement(nil, count: index - slots.count + 1))
                    }
                    slots[index] = newValue
                    aside[id] = nil
                } else {
                    aside[id] = newValue
                }
                count += (newValue == nil ? 0 : 1) - (old == nil ? 0 : 1)
            }
        }

        /// Every send: those in place by id, then those kept aside.
        public var values: Values { Values(table: self) }

        public var keys: LazyMapSequence<Values, Int> { values.lazy.map(\.id) }

        public var isEmpty: Bool { count == 0 }

        public struct Values: Sequence, Sendable {
            let table: SendTable

            public struct Iterator: IteratorProtocol {
                var slots: IndexingIterator<[Send?]>
                var aside: Dictionary<Int, Send>.Values.Iterator

                public mutating func next() -> Send? {
                    while let slot = slots.next() { if let send = slot { return send } }
                    return aside.next()
                }
            }

            public func makeIterator() -> Iterator {
                Iterator(slots: table.slots.makeIterator(), aside: table.aside.values.makeIterator())
            }

            public var underestimatedCount: Int { table.count }
        }
    }
}
