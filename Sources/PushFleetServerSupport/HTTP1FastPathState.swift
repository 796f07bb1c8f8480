/// The lifecycle of a connection's ``HTTP1FastPath``: answering requests itself, then, from the
/// first request it does not answer, handing the connection to the full HTTP/1.1 pipeline for
/// good. While it answers, the handlers behind it see nothing, so it keeps the connection's idle
/// timeout and its graceful stop itself. Times are nanoseconds of an injected clock.
package struct HTTP1FastPathState: Sendable, Equatable {
    package enum Mode: Sendable, Equatable {
        case answering
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
    }

    package private(set) var mode = Mode.answering
    /// Between requests, every one read answered.
    package private(set) var quiet = false
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
        guard mode == .answering, !timerStarted else { return .none }
        timerStarted = true
        return .armIdleTimer(at: now &+ idleTimeout)
    }

    /// The idle timer fired: close a connection quiet for the whole timeout, else look again
    /// when it would be (one timer per connection, not one per request).
    package mutating func idleTimerFired(now: Int64) -> Action {
        guard mode == .answering else { return .none }
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

    /// A request this handler does not answer: the full pipeline takes it and all that follows.
    package mutating func handOver() -> Action {
        guard mode == .answering else { return .none }
        mode = .handedOver
        return .handOver
    }

    /// The server is stopping. Every request read here was answered at once, so nothing is in
    /// progress: close now.
    package mutating func quiesce() -> Action {
        guard mode == .answering else { return .none }
        mode = .closed
        return .close
    }

    /// The request just answered asked to close, or the connection closed.
    package mutating func closed() {
        mode = .closed
    }
}
