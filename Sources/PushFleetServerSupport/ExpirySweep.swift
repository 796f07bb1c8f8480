/// When a store drops its expired entries, and which ones. Stores sweep from their request path
/// rather than from a background task, so a sweep runs at most once per interval and the scan's
/// cost is spread over that many requests. Pure: the caller passes `now` and holds any lock.
public struct ExpirySweep: Sendable, Equatable {
    /// When the last sweep ran (the caller's clock, in nanoseconds).
    public private(set) var last: Int64

    public init(last: Int64 = 0) {
        self.last = last
    }

    /// True when more than `interval` has passed since the last sweep; the sweep is then taken as
    /// done at `now`, so of callers racing at one instant only the first is told to sweep.
    public mutating func isDue(now: Int64, interval: Int64) -> Bool {
        let (elapsed, overflow) = now.subtractingReportingOverflow(last)
        guard overflow ? now > last : elapsed > interval else { return false }
        last = now
        return true
    }

    /// The keys of the entries expired at `now`: their expiry is at or before it. An entry whose
    /// expiry is nil never expires.
    public static func expired<Key, Value, Entries: Sequence<(key: Key, value: Value)>>(
        in entries: Entries, now: Int64, expiresAt: (Value) -> Int64?
    ) -> [Key] {
        entries.compactMap { key, value in
            guard let instant = expiresAt(value), instant <= now else { return nil }
            return key
        }
    }
}
