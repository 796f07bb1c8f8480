/// The lifecycle of a connection's ``HTTP1FastPath``: answering requests itself; waiting for an
/// answer it owes (``EventLoopResponder/respondLater(_:head:body:channel:)``); lending one request
/// to the full HTTP/1.1 pipeline behind it and taking the connection back once that answer is
/// written; or, from the first request it cannot frame, handing the connection to the pipeline
/// for good. While it has the connection, the handlers behind it see nothing, so it keeps the
/// connection's idle timeout and its graceful stop itself. Times are nanoseconds of an injected
/// clock.
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
    let idleTimeout: Int64
    private var lastActivity: Int64 = 0
    private var timerStarted = false

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

    /// A read ended with part of a request held: a client that sends a request in pieces gets
    /// the full pipeline's timeouts for slow heads and bodies.
    package mutating func readEnded(holdingPartialRequest: Bool) -> Action {
        guard mode == .answering else { return .none }
        if holdingPartialRequest { return handOver() }
        guard !quiet else { return .none }
        quiet = true
        return .quietBegan
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
