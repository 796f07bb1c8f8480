/// How often an HTTP/2 client may PING: a bucket of `burst` pings that refills one ping every
/// `interval`. Push clients ping idle connections for liveness, a few at once after a network
/// change; a flood (each PING costs an ACK) empties the bucket, and the connection is then told
/// GOAWAY with ENHANCE_YOUR_CALM.
public struct PingRateState: Sendable, Equatable {
    let interval: Int64
    let burst: Int
    /// Pings in the bucket, in `interval` units scaled by the interval (to stay in integers):
    /// one ping is `interval`.
    var credit: Int64
    var last: Int64?

    public init(interval: Duration, burst: Int) {
        self.interval = max(1, interval.saturatingNanoseconds)
        self.burst = max(1, burst)
        let (full, overflow) = self.interval.multipliedReportingOverflow(by: Int64(self.burst))
        credit = overflow ? .max : full
    }

    /// A PING (not an ACK) arrived: true when it is within the rate, false when the client
    /// abuses it.
    public mutating func received(now: Int64) -> Bool {
        let (full, overflow) = interval.multipliedReportingOverflow(by: Int64(burst))
        let capacity = overflow ? Int64.max : full
        if let last, now > last {
            credit = min(capacity, PushFleetServerSupport.deadline(credit, plus: now - last))
        }
        last = max(last ?? now, now)
        guard credit >= interval else { return false }
        credit -= interval
        return true
    }
}
