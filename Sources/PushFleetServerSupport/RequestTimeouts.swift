/// Times are nanoseconds of a monotonic clock throughout; the state machines below read no clock
/// and touch no socket, they say what the channel handlers must do.
public enum TimerAction: Sendable, Equatable {
    case none
    /// Arm the one timer for this instant, replacing an armed one.
    case arm(at: Int64)
    case disarm
    /// Answer with this status unless something was answered already, then close.
    case reject(status: Int)
    case close
}

extension Duration {
    /// Nanoseconds, saturating at `Int64.max`.
    var saturatingNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}

func deadline(_ now: Int64, plus span: Int64) -> Int64 {
    let (sum, overflow) = now.addingReportingOverflow(span)
    return overflow ? .max : sum
}

/// A new connection's first request: its head must be complete (the blank line seen in the raw
/// bytes) within the header timeout, or the connection gets a 408 and is closed. A request the
/// parser refused gets a 400 and a close unless the connection answers within a grace period:
/// bytes a WebSocket client sends right behind its upgrade request also fail to parse as HTTP,
/// and that connection answers 101 at once.
public struct FirstRequestState: Sendable, Equatable {
    var awaiting = true
    /// The last bytes seen, to find a blank line split across reads.
    var tail: [UInt8] = []
    public private(set) var answered = false
    /// The first request's head is not complete yet.
    public var awaitingHead: Bool { awaiting }
    var headerDeadline: Int64 = .max
    var refusalDeadline: Int64 = .max
    let timeout: Int64
    static let refusalGrace: Int64 = 1_000_000_000

    public init(headerTimeout: Duration) {
        timeout = headerTimeout.saturatingNanoseconds
    }

    private var nextDeadline: Int64 { min(awaiting ? headerDeadline : .max, answered ? .max : refusalDeadline) }

    public mutating func connected(now: Int64) -> TimerAction {
        headerDeadline = PushFleetServerSupport.deadline(now, plus: timeout)
        return .arm(at: headerDeadline)
    }

    public mutating func received<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> TimerAction {
        guard awaiting else { return .none }
        for byte in bytes {
            if byte == 0x0A, tail.count == 3, tail[0] == 0x0D, tail[1] == 0x0A, tail[2] == 0x0D {
                awaiting = false
                tail = []
                let next = nextDeadline
                return next == .max ? .disarm : .arm(at: next)
            }
            if tail.count == 3 { tail.removeFirst() }
            tail.append(byte)
        }
        return .none
    }

    public mutating func wrote() {
        answered = true
    }

    /// A handler after this one answered the requests so far itself and hands the rest of the
    /// connection to the inner pipeline: for that pipeline the next request is the first, owed
    /// within the header timeout from now and answered 400 if it does not parse.
    public mutating func innerBegins(now: Int64) -> TimerAction {
        awaiting = true
        answered = false
        tail = []
        refusalDeadline = .max
        headerDeadline = PushFleetServerSupport.deadline(now, plus: timeout)
        return .arm(at: headerDeadline)
    }

    /// The HTTP parser refused what the client sent.
    public mutating func parseFailed(now: Int64) -> TimerAction {
        guard !answered, refusalDeadline == .max else { return .none }
        refusalDeadline = PushFleetServerSupport.deadline(now, plus: Self.refusalGrace)
        return .arm(at: nextDeadline)
    }

    public mutating func timerFired(now: Int64) -> TimerAction {
        if awaiting && now >= headerDeadline {
            awaiting = false
            return .reject(status: 408)
        }
        if !answered && now >= refusalDeadline {
            awaiting = false
            return .reject(status: 400)
        }
        let next = nextDeadline
        return next == .max ? .none : .arm(at: next)
    }

    /// The connection's handler returned and the connection is still open.
    public mutating func handlerFinished() -> TimerAction {
        awaiting = false
        return answered ? .close : .reject(status: 400)
    }
}
