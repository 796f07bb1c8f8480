/// A server of a fixed rate behind a bounded queue, kept in virtual time: a knob that gives a
/// mock push service or the reference backend a capacity known in advance (M/D/1-like).
///
/// Each admitted item is served `1/rate` after the one before it (or after it arrives, when the
/// server is idle); an item that would find `capacity` items waiting is refused, as APNs answers
/// 429 `TooManyRequests`. Nothing is stored per item: the queue's length is how far ahead the
/// server is booked, times its rate.
public struct ServiceQueue: Sendable, Equatable {
    /// The most a knob may set: beyond it the mock's own cost is the limit.
    public static let rateRange: ClosedRange<Double> = 0.001...10_000_000
    public static let capacityRange: ClosedRange<Int> = 1...10_000_000

    /// Items served per second.
    public let rate: Double
    /// Items that may wait at once.
    public let capacity: Int
    /// When the server is free again, on the caller's clock (ns).
    private var freeAt: Int64 = .min
    private let serviceTime: Int64

    /// The longest a full queue may take to serve: it bounds how far ahead the server is booked.
    public static let longestWait: Int64 = 86_400 * 1_000_000_000

    /// A queue of one quarter second's service unless given, and at most a day's.
    public init(rate: Double, capacity: Int? = nil) {
        self.rate = min(max(rate, Self.rateRange.lowerBound), Self.rateRange.upperBound)
        let serviceTime = max(1, Int64((1e9 / self.rate).rounded()))
        self.serviceTime = serviceTime
        let asked = min(max(capacity ?? Int((self.rate / 4).rounded(.up)), 1), Self.capacityRange.upperBound)
        self.capacity = Int(min(Int64(asked), max(1, Self.longestWait / serviceTime)))
    }

    /// Admits an item arriving at `now`: how long until it has been served, or nil when the queue
    /// is full.
    public mutating func admit(at now: Int64) -> Int64? {
        let start = max(now, freeAt)
        let waiting = Double(start - now) / Double(serviceTime)
        guard waiting < Double(capacity) else { return nil }
        freeAt = start + serviceTime
        return freeAt - now
    }
}
