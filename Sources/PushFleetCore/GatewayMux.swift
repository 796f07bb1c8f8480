/// One multiplexed gateway connection's life as a state machine: which devices it carries, when
/// to (re)connect, what to send when the connection is (back) up, when to give up.
///
/// Pure, like ``DeviceLifecycle``: each event returns the ``Action`` the engine must carry out,
/// time comes in with the events, and nothing here reads a clock or touches a socket. Devices
/// are known by their push token.
public struct GatewayMux: Sendable {
    public enum Action: Sendable, Equatable {
        case none
        /// Open the connection, then report ``connected(now:)`` or ``dropped(_:now:)``.
        case connect
        /// Send a subscribe (or unsubscribe) command for these devices on the live connection.
        case subscribe([String])
        case unsubscribe([String])
        /// The connection is up: subscribe every device it carries again, and have each renew its
        /// registration (a backend that restarted meanwhile may have lost it).
        case resubscribe([String])
        /// The service took these devices offline: at this instant, report ``pauseEnded(_:)``.
        case resubscribeAt(Int64, [String])
        /// The connection failed or dropped: count the failure's class (when there is one) as a
        /// gateway error, and at the instant report ``retryDue(now:)``.
        case retry(at: Int64, error: String?)
        /// The run is stopping: no more connections.
        case giveUp
    }

    private enum Phase: Sendable, Equatable {
        case idle
        /// Connecting or connected since an attempt began at this instant.
        case connecting(since: Int64)
        case connected(since: Int64)
        case waiting
        case stopped
    }

    /// A connection that held at least this long (from its attempt) starts the backoff afresh.
    public static let heldLong: Int64 = 10_000_000_000
    /// How long a device the service took offline stays away, as a phone does.
    public static let offlinePause: Int64 = 200_000_000

    private var phase = Phase.idle
    /// A connection was up before: the next one is a return after a drop.
    private var everConnected = false
    private var backoff: Backoff
    /// The devices the connection carries, by token.
    public private(set) var tokens: ShardedSet<String> = []

    public init(backoff: Backoff) {
        self.backoff = backoff
    }

    public var isConnected: Bool {
        if case .connected = phase { true } else { false }
    }

    public var isStopped: Bool { phase == .stopped }

    /// Retries made since the last connection that held.
    public var attempt: Int { backoff.attempt }

    // MARK: The connection

    public mutating func start(now: Int64) -> Action {
        guard phase == .idle else { return .none }
        phase = .connecting(since: now)
        return .connect
    }

    /// The first connection subscribes the devices that joined while it opened; a connection
    /// back after a drop resubscribes them and has them renew their registrations.
    public mutating func connected(now: Int64) -> Action {
        guard case .connecting(let since) = phase else { return .none }
        phase = .connected(since: since)
        defer { everConnected = true }
        guard !tokens.isEmpty else { return .none }
        return everConnected ? .resubscribe(tokens.sorted()) : .subscribe(tokens.sorted())
    }

    /// The attempt failed, or the connection ended; `error` is the failure's class (nil when it
    /// ended without one).
    public mutating func dropped(_ error: String?, now: Int64) -> Action {
        let since: Int64
        switch phase {
        case .connecting(let began), .connected(let began): since = began
        case .stopped: return .giveUp
        case .idle, .waiting: return .none
        }
        if now - since > Self.heldLong { backoff.reset() }
        phase = .waiting
        return .retry(at: now + backoff.next(), error: error)
    }

    public mutating func retryDue(now: Int64) -> Action {
        switch phase {
        case .waiting:
            phase = .connecting(since: now)
            return .connect
        case .stopped: return .giveUp
        default: return .none
        }
    }

    /// The run is stopping: whatever happens next, no more connections.
    public mutating func stop() -> Action {
        phase = .stopped
        return .giveUp
    }

    // MARK: Devices

    /// A device joins. Without a live connection nothing is sent: the connection subscribes every
    /// device it carries when it comes up.
    public mutating func add(_ token: String) -> Action {
        tokens.insert(token)
        return isConnected ? .subscribe([token]) : .none
    }

    /// A device leaves (it failed or departed).
    public mutating func remove(_ token: String) -> Action {
        tokens.remove(token)
        return isConnected ? .unsubscribe([token]) : .none
    }

    /// The service took devices offline: they come back after a pause.
    public mutating func takenOffline(_ offline: [String], now: Int64) -> Action {
        guard isConnected, !offline.isEmpty else { return .none }
        return .resubscribeAt(now + Self.offlinePause, offline)
    }

    /// The pause is over: those still carried subscribe again.
    public mutating func pauseEnded(_ offline: [String]) -> Action {
        let still = offline.filter { tokens.contains($0) }
        guard isConnected, !still.isEmpty else { return .none }
        return .subscribe(still)
    }
}
