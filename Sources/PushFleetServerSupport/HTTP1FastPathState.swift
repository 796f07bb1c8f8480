/// The lifecycle of a connection's ``HTTP1FastPath``: answering requests itself; waiting for an
/// answer it owes (``EventLoopResponder/respondLater(_:head:body:channel:)``); lending one request
/// to the full HTTP/1.1 pipeline behind it and taking the connection back once that answer is
/// written; or, from the first request it cannot frame, handing the connection to the pipeline
/// for good. While it has the connection, the handlers behind it see nothing, so it keeps the
/// connection's idle timeout and its graceful stop itself. A request whose bytes span reads (a
/// client that writes the head and the body apart) is held while it comes quickly: for at most
/// ``partialReads`` reads and ``partialGrace``, then the pipeline takes it with its timeouts for
/// slow heads and bodies. Times are nanoseconds of an injected clock.
package struct HTTP1FastPathState: Sendable, Equatable {
    package enum Mode: Sendable, Equatable {
        case answering
        /// An answer is owed: the bytes after its request wait until it is written.
        case owing
        /// The pipeline behind has one request; `remaining` of its bytes are still to come.
        case lending(remaining: Int, answered: Bool)
        /// The full pipeline has the connection (and this handler has left it).
        case handedOver
        case closed
    }

    package enum Action: Sendable, Equatable {
        case none
        case armIdleTimer(at: Int64)
        /// Look at the request held in pieces again at this instant (``partialTimerFired(now:)``).
        case armPartialTimer(at: Int64)
        case close
        case handOver
        /// The connection is kept alive between requests: a full server may close it for room
        /// once it has been so for long enough (``StalledConnections``, as a quiet one).
        case quietBegan
        /// The connection is back from the pipeline behind: answer what waited.
        case resume
        /// The server is stopping while the pipeline behind has a request: it closes after that
        /// answer, as it does for its own.
        case passQuiesce
    }

    package private(set) var mode = Mode.answering
    /// Between requests, every one read answered.
    package private(set) var quiet = false
    /// The server is stopping: close once the answer owed or lent is written.
    package private(set) var closing = false
    /// The client ended its input while an answer was owed: passed on once it is written.
    package private(set) var inputEndHeld = false
    /// When the request held in pieces was first found incomplete at the end of a read (nil
    /// when none is held): the pipeline's header timeout counts from here after a hand-over.
    package private(set) var partialSince: Int64?
    /// Reads that ended with that request still incomplete.
    private var partialReadCount = 0
    /// The partial timer is armed; it is not cancelled when a request completes, only looked at.
    private var partialTimerArmed = false
    let idleTimeout: Int64
    private var lastActivity: Int64 = 0
    private var timerStarted = false

    /// How long a request may take to arrive whole at the fast path, and in how many reads; a
    /// head and its body written apart come within microseconds, in two reads.
    package static let partialGrace: Int64 = 500_000_000
    package static let partialReads = 8

    package init(idleTimeout: Duration) {
        self.idleTimeout = max(1, idleTimeout.saturatingNanoseconds)
    }

    /// Bytes arrived; true when they end a quiet phase.
    package mutating func bytesArrived(now: Int64) -> Bool {
        lastActivity = now
        defer { quiet = false }
        return quiet
    }

    /// Whether the idle timer is to be armed now: at the first bytes, as until then the first
    /// request's header timeout (``FirstRequestState``) bounds the connection.
    package mutating func firstBytes(now: Int64) -> Action {
        guard mode != .handedOver, mode != .closed, !timerStarted else { return .none }
        timerStarted = true
        return .armIdleTimer(at: now &+ idleTimeout)
    }

    /// The idle timer fired: close a connection quiet for the whole timeout, else look again
    /// when it would be (one timer per connection, not one per request). A request in progress,
    /// here or behind, is not idleness: its own timeouts bound it.
    package mutating func idleTimerFired(now: Int64) -> Action {
        switch mode {
        case .handedOver, .closed: return .none
        case .owing, .lending: return .armIdleTimer(at: now &+ idleTimeout)
        case .answering: break
        }
        let due = lastActivity &+ idleTimeout
        guard now >= due else { return .armIdleTimer(at: due) }
        mode = .closed
        return .close
    }

    /// A read ended, holding part of a request or not. A request that stays in pieces past
    /// ``partialReads`` reads or ``partialGrace`` gets the full pipeline's timeouts for slow heads
    /// and bodies; its count starts at the first read that leaves it incomplete.
    package mutating func readEnded(holdingPartialRequest: Bool, now: Int64) -> Action {
        guard mode == .answering else { return .none }
        guard holdingPartialRequest else {
            partialSince = nil
            guard !quiet else { return .none }
            quiet = true
            return .quietBegan
        }
        if partialSince == nil {
            partialSince = now
            partialReadCount = 0
        }
        partialReadCount += 1
        if partialReadCount > Self.partialReads || now &- partialSince! >= Self.partialGrace { return handOver() }
        guard !partialTimerArmed else { return .none }
        partialTimerArmed = true
        return .armPartialTimer(at: partialSince! &+ Self.partialGrace)
    }

    /// The partial timer fired: hand over a request still in pieces past its grace, look again
    /// when a younger one's would end, or lapse with none held.
    package mutating func partialTimerFired(now: Int64) -> Action {
        partialTimerArmed = false
        guard mode == .answering, let since = partialSince else { return .none }
        let due = since &+ Self.partialGrace
        guard now >= due else {
            partialTimerArmed = true
            return .armPartialTimer(at: due)
        }
        return handOver()
    }

    /// A request's bytes were taken whole (answered here): what is held after them is a new
    /// request's, whose count starts afresh.
    package mutating func requestEnded() {
        partialSince = nil
    }

    /// A request this handler cannot frame: the full pipeline takes it and all that follows.
    package mutating func handOver() -> Action {
        guard mode == .answering else { return .none }
        mode = .handedOver
        return .handOver
    }

    /// The answer to the request just read is owed.
    package mutating func owe() {
        guard mode == .answering else { return }
        mode = .owing
        partialSince = nil
    }

    /// The owed answer was written at `now`.
    package mutating func owedAnswerWritten(now: Int64) -> Action {
        guard mode == .owing else { return .none }
        lastActivity = now
        if closing {
            mode = .closed
            return .close
        }
        mode = .answering
        return .resume
    }

    /// The pipeline behind takes one request of `length` bytes, of which `forwarded` are given
    /// to it now.
    package mutating func lend(length: Int, forwarded: Int) {
        guard mode == .answering else { return }
        mode = .lending(remaining: max(0, length - forwarded), answered: false)
        partialSince = nil
    }

    /// More of the lent request's bytes went behind. Its answer may have come first (a refusal
    /// before the body), but the pipeline behind still expects the whole body.
    package mutating func forwarded(_ count: Int, now: Int64) -> Action {
        guard case .lending(let remaining, let answered) = mode else { return .none }
        mode = .lending(remaining: max(0, remaining - count), answered: answered)
        return takeBackIfDone(now: now)
    }

    /// The bytes of the lent request still to go behind (0 when not lending).
    package var lentRemaining: Int {
        if case .lending(let remaining, _) = mode { return remaining }
        return 0
    }

    /// The pipeline behind wrote its answer's end at `now`.
    package mutating func innerAnswered(now: Int64) -> Action {
        guard case .lending(let remaining, _) = mode else { return .none }
        mode = .lending(remaining: remaining, answered: true)
        return takeBackIfDone(now: now)
    }

    private mutating func takeBackIfDone(now: Int64) -> Action {
        guard case .lending(0, true) = mode else { return .none }
        lastActivity = now
        if closing {
            // The pipeline behind was told of the stop and closes after its answer.
            mode = .closed
            return .none
        }
        mode = .answering
        return .resume
    }

    /// After ``Action/resume`` with nothing waiting: the connection is quiet between requests.
    package mutating func resumedIdle() -> Action {
        guard mode == .answering, !quiet else { return .none }
        quiet = true
        return .quietBegan
    }

    /// The server is stopping. Between requests: close now. An answer owed: close once it is
    /// written. A request lent: the pipeline behind closes after its answer.
    package mutating func quiesce() -> Action {
        switch mode {
        case .answering:
            mode = .closed
            return .close
        case .owing:
            closing = true
            return .none
        case .lending:
            closing = true
            return .passQuiesce
        case .handedOver, .closed:
            return .none
        }
    }

    /// The client ended its input (a half-close after its requests). The pipeline behind sees no
    /// request of its own while an answer is owed here and would close at once: the end waits
    /// for that answer. True when it goes on now.
    package mutating func inputEnded() -> Bool {
        guard mode == .owing else { return true }
        inputEndHeld = true
        return false
    }

    /// After an owed answer, once the requests that waited are answered, lent or handed over:
    /// whether the end of input held goes on now.
    package mutating func releaseInputEnd() -> Bool {
        guard inputEndHeld, mode != .owing, mode != .closed else { return false }
        inputEndHeld = false
        return true
    }

    /// The request just answered asked to close, or the connection closed.
    package mutating func closed() {
        mode = .closed
    }
}
