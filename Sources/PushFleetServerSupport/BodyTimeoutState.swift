/// One request's body, from its head to its end: too large a declared or received body is
/// refused with 413 at once, and a body that is slow is refused with 408.
///
/// Slow is either of two rules, so that neither a pause nor a trickle holds a connection:
/// - a pause between parts longer than the body timeout (nginx's `client_body_timeout`);
/// - a body behind its minimum rate: it must be complete by the head's time plus the body
///   timeout plus one second for every `minRate` bytes received so far (Apache's
///   `mod_reqtimeout` with `MinRate`). A trickle of a byte every few seconds is refused one body
///   timeout after its head, while a large body at a decent rate is never cut.
///
/// A body of many parts arms one timer: parts move the deadline later, and the armed timer finds
/// it moved when it fires.
public struct BodyTimeoutState: Sendable, Equatable {
    var receiving = false
    var armed = false
    var started: Int64 = 0
    var lastPart: Int64 = 0
    var received = 0
    let timeout: Int64
    /// Bytes a second the body must keep up after the body timeout; nil: pauses alone count.
    let minRate: Int?
    /// Largest body taken; nil: any.
    let maxSize: Int?
    /// The request's own: the smaller of ``maxSize`` and its route's cap.
    var requestMax: Int?

    public init(bodyTimeout: Duration, minRate: Int? = nil, maxSize: Int? = nil) {
        timeout = bodyTimeout.saturatingNanoseconds
        self.minRate = minRate.map { max(1, $0) }
        self.maxSize = maxSize
        self.requestMax = maxSize
    }

    /// When the body must be complete (or its next part arrive) by.
    var deadline: Int64 {
        let pause = PushFleetServerSupport.deadline(lastPart, plus: timeout)
        guard let minRate else { return pause }
        let (allowance, overflow) = Int64(received).multipliedReportingOverflow(by: 1_000_000_000)
        let rate = PushFleetServerSupport.deadline(PushFleetServerSupport.deadline(started, plus: timeout), plus: overflow ? .max : allowance / Int64(minRate))
        return min(pause, rate)
    }

    /// A request head; `declaredLength` is its `Content-Length`, nil when it has none;
    /// `routeMax` its route's own cap, when smaller.
    public mutating func head(now: Int64, declaredLength: Int? = nil, routeMax: Int? = nil) -> TimerAction {
        requestMax = [maxSize, routeMax].compactMap { $0 }.min()
        if let requestMax, let declaredLength, declaredLength > requestMax {
            return refuse(status: 413)
        }
        receiving = true
        started = now
        received = 0
        return body(now: now)
    }

    /// A part of `bytes` bytes of the body.
    public mutating func body(now: Int64, bytes: Int = 0) -> TimerAction {
        guard receiving else { return .none }
        let (sum, overflow) = received.addingReportingOverflow(bytes)
        received = overflow ? .max : sum
        if let requestMax, received > requestMax {
            return refuse(status: 413)
        }
        lastPart = now
        guard !armed else { return .none }
        armed = true
        return .arm(at: deadline)
    }

    public mutating func end() -> TimerAction {
        receiving = false
        guard armed else { return .none }
        armed = false
        return .disarm
    }

    public mutating func timerFired(now: Int64) -> TimerAction {
        armed = false
        guard receiving else { return .none }
        let due = deadline
        guard now >= due else {
            armed = true
            return .arm(at: due)
        }
        return refuse(status: 408)
    }

    private mutating func refuse(status: Int) -> TimerAction {
        receiving = false
        armed = false
        return .reject(status: status)
    }
}
