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
    }

    package private(set) var mode = Mode.answering
    let idleTimeout: Int64
    private var lastActivity: Int64 = 0

    package init(idleTimeout: Duration) {
        self.idleTimeout = max(1, idleTimeout.saturatingNanoseconds)
    }

    /// The connection is open (or this handler joined an open one).
    package mutating func started(now: Int64) -> Action {
        guard mode == .answering else { return .none }
        lastActivity = now
        return .armIdleTimer(at: now &+ idleTimeout)
    }

    /// Bytes arrived or an answer was written.
    package mutating func active(now: Int64) {
        lastActivity = now
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
        guard mode == .answering, holdingPartialRequest else { return .none }
        return handOver()
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
