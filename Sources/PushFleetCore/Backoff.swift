/// Exponential backoff with full jitter for reconnects, as phones do: the n-th retry waits a
/// uniform draw in [0, min(cap, base · 2ⁿ)], so a fleet that lost its push service does not
/// come back in lockstep and does not hammer it while it is down.
public struct Backoff: Sendable {
    public var base: Duration
    public var cap: Duration
    /// Retries made since the last success.
    public private(set) var attempt = 0
    private var rng: SplitMix64

    public init(base: Duration = .milliseconds(200), cap: Duration = .seconds(10), seed: UInt64) {
        self.base = base
        self.cap = cap
        self.rng = SplitMix64(seed: seed)
    }

    /// The wait before the next retry, in nanoseconds; counts the retry.
    public mutating func next() -> Int64 {
        let ceiling = min(cap.nanoseconds, base.nanoseconds << min(attempt, 30))
        attempt += 1
        return Int64(rng.nextUnit() * Double(max(ceiling, 1)))
    }

    /// A connection held: the next failure starts from the base again.
    public mutating func reset() {
        attempt = 0
    }
}
