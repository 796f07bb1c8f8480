import PushFleetCore

extension DeliveryLedger {
    /// The run's sends by id. A run numbers its sends 1, 2, 3… (a shard I of K: I, I+K, I+2K…,
    /// ``spaced(stride:offset:)``), so they sit in an array at their number: a dictionary would
    /// cost about twice the bytes per send, and a ledger holds every send of the run. An id off
    /// that pattern (a merged or hand-made ledger) is kept aside in a dictionary.
    ///
    /// Sends the ledger folded (judged and let go of) leave one bit each, so a push naming one
    /// later is known to be past the horizon; the slots before the last folded one are dropped,
    /// what is still kept there moving aside.
    public struct SendTable: Sendable {
        private var slots: [Send?] = []
        /// Slots dropped from the front: `slots[0]` is slot `base`.
        private var base = 0
        private var aside: [Int: Send] = [:]
        private var stride = 1
        private var offset = 0
        public private(set) var count = 0
        /// One bit per slot, set when its send was folded.
        private var foldedBits: [UInt64] = []
        private var foldedAside = Set<Int>()

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
            guard let index = absoluteSlot(id), index >= base else { return nil }
            return index - base <= slots.count + 65_536 ? index - base : nil
        }

        private func absoluteSlot(_ id: Int) -> Int? {
            let relative = id &- 1 &- offset
            guard relative >= 0, relative % stride == 0 else { return nil }
            return relative / stride
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

        /// Lets go of the sends `ids`, remembering only that they were folded, and drops the
        /// slots up to the last of them.
        mutating func fold(_ ids: [Int]) {
            var last = -1
            for id in ids {
                guard self[id] != nil else { continue }
                self[id] = nil
                if let index = absoluteSlot(id) {
                    let word = index / 64
                    if word >= foldedBits.count { foldedBits.append(contentsOf: repeatElement(0, count: word - foldedBits.count + 1)) }
                    foldedBits[word] |= 1 << UInt64(index % 64)
                    last = max(last, index)
                } else {
                    foldedAside.insert(id)
                }
            }
            guard last >= base else { return }
            let drop = min(slots.count, last + 1 - base)
            for send in slots[..<drop] { if let send { aside[send.id] = send } }
            slots.removeFirst(drop)
            base += drop
        }

        /// Whether the send was folded.
        public func isFolded(_ id: Int) -> Bool {
            guard let index = absoluteSlot(id) else { return foldedAside.contains(id) }
            let word = index / 64
            return word < foldedBits.count && foldedBits[word] & (1 << UInt64(index % 64)) != 0
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
