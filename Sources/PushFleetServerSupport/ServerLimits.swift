#if canImport(Glibc)
import Glibc
#endif

/// How long and how many: the timeouts and the connection cap of one of our servers, so that slow,
/// idle or too many clients cost a bounded amount and never stop it. Defaults follow nginx's.
public struct ServerLimits: Sendable, Equatable {
    /// Connections served at once; further ones wait in the listen backlog until one closes.
    /// Nil: a share of the open-files limit at start (``resolved(share:)``), so that the ports of
    /// one process together never accept past it (accepting then fails with EMFILE, which NIO
    /// retries in a busy loop).
    public var maxConnections: Int?
    /// A keep-alive connection with no request in progress is closed after this long (an
    /// upgraded WebSocket is not: devices are quiet for long stretches by design).
    public var idleTimeout: Duration
    /// A new connection's first request head must be complete within this long.
    public var headerTimeout: Duration
    /// The longest pause while a request body arrives, and the time a body has before
    /// ``minBodyRate`` applies.
    public var bodyTimeout: Duration
    /// Bytes a second a request body must average once its ``bodyTimeout`` has passed
    /// (see ``BodyTimeoutState``).
    public var minBodyRate: Int
    /// The largest request body: a larger `Content-Length` is answered 413 before the body is
    /// read, and so is a body that grows past it. Routes refuse smaller bodies of their own.
    public var maxBodySize: Int
    /// HTTP/2 PINGs a client may send at once, and how often one more is allowed
    /// (see ``PingRateState``).
    public var pingBurst: Int
    public var pingInterval: Duration
    /// How long a connection must have been stalled before a full server closes it to take a
    /// new one (see ``ConnectionCap``).
    public var evictionGrace: Duration
    /// Smaller caps of known routes, first match wins: a declared length, a chunk's size line or
    /// a body past its route's cap is answered 413 when it arrives, as nginx does, instead of
    /// waiting for the route to read it (a client that then stalls held it until the body timeout).
    public var routeBodyLimits: [RouteBodyLimit] = []

    public init(
        maxConnections: Int? = nil,
        idleTimeout: Duration = .seconds(75),
        headerTimeout: Duration = .seconds(60),
        bodyTimeout: Duration = .seconds(60),
        minBodyRate: Int = 1024,
        maxBodySize: Int = 4 * 1024 * 1024,
        pingBurst: Int = 10,
        pingInterval: Duration = .seconds(1),
        evictionGrace: Duration = .seconds(1)
    ) {
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        self.bodyTimeout = bodyTimeout
        self.minBodyRate = minBodyRate
        self.maxBodySize = maxBodySize
        self.pingBurst = pingBurst
        self.pingInterval = pingInterval
        self.evictionGrace = evictionGrace
    }

    /// The largest body a request with this method and target may send.
    public func maxBody(method: some StringProtocol, target: some StringProtocol) -> Int {
        RouteBodyLimit.cap(routeBodyLimits, method: method.utf8, target: target.utf8, port: maxBodySize)
    }

    /// The bounds every value must be within (checked where a value enters).
    public static let connectionRange = 1...1_000_000
    public static let timeoutRange: ClosedRange<Duration> = .milliseconds(100)...(.seconds(86_400))
    public static let bodyRateRange = 1...(1 << 30)
    public static let bodySizeRange = 1024...(1 << 40)
    public static let pingBurstRange = 1...1_000
    public static let pingIntervalRange: ClosedRange<Duration> = .milliseconds(1)...(.seconds(86_400))
    public static let evictionGraceRange: ClosedRange<Duration> = .zero...(.seconds(86_400))

    /// This port's share of the open-files limit in force now, less room for the process's other
    /// descriptors.
    public static func defaultMaxConnections(share: Double = 1) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 256 }
        let soft = limit.rlim_cur == rlim_t.max ? UInt64(connectionRange.upperBound) : UInt64(limit.rlim_cur)
        let usable = Double(min(UInt64(connectionRange.upperBound), soft > 128 ? soft - 64 : soft / 2))
        return max(16, Int(usable * min(1, max(0, share))))
    }

    /// The limits with the connection cap filled in: ``maxConnections``, or `share` of the
    /// open-files limit.
    public func resolved(share: Double) -> ServerLimits {
        var limits = self
        if limits.maxConnections == nil { limits.maxConnections = Self.defaultMaxConnections(share: share) }
        return limits
    }

    /// Every value out of range, named as the flags and settings name them; empty when usable.
    public func problems() -> [String] {
        var problems: [String] = []
        if let maxConnections, !Self.connectionRange.contains(maxConnections) {
            problems.append("max connections must be between 1 and \(Self.connectionRange.upperBound), got \(maxConnections)")
        }
        for (name, value) in [("idle timeout", idleTimeout), ("header timeout", headerTimeout), ("body timeout", bodyTimeout)]
        where !Self.timeoutRange.contains(value) {
            problems.append("\(name) must be between 100ms and 24h")
        }
        if !Self.bodyRateRange.contains(minBodyRate) {
            problems.append("min body rate must be between 1 and \(Self.bodyRateRange.upperBound) bytes a second, got \(minBodyRate)")
        }
        if !Self.bodySizeRange.contains(maxBodySize) {
            problems.append("max body size must be between 1 KiB and 1 TiB, got \(maxBodySize)")
        }
        if !Self.pingBurstRange.contains(pingBurst) {
            problems.append("ping burst must be between 1 and \(Self.pingBurstRange.upperBound), got \(pingBurst)")
        }
        if !Self.pingIntervalRange.contains(pingInterval) {
            problems.append("ping interval must be between 1ms and 24h")
        }
        if !Self.evictionGraceRange.contains(evictionGrace) {
            problems.append("eviction grace must be between 0 and 24h")
        }
        return problems
    }
}

/// One route's body cap: requests whose method is `method` and whose target starts with
/// `pathPrefix` (compared without case, as the raw bytes are read before any parser).
public struct RouteBodyLimit: Sendable, Equatable {
    public var method: String
    public var pathPrefix: String
    public var maxBytes: Int

    public init(method: String, pathPrefix: String, maxBytes: Int) {
        self.method = method.lowercased()
        self.pathPrefix = pathPrefix.lowercased()
        self.maxBytes = maxBytes
    }

    /// The cap of the first rule whose method and path prefix match, compared as ASCII bytes
    /// without case and without a copy (the framing guard reads raw bytes), else `port`'s.
    static func cap(_ rules: [RouteBodyLimit], method: some Collection<UInt8>, target: some Collection<UInt8>, port: Int) -> Int {
        guard let rule = rules.first(where: { Self.equal(method, $0.method.utf8, prefixOnly: false) && Self.equal(target, $0.pathPrefix.utf8, prefixOnly: true) })
        else { return port }
        return min(port, rule.maxBytes)
    }

    /// `text` equals `lowered` (or starts with it), ignoring ASCII case; `lowered` is lower case.
    private static func equal(_ text: some Collection<UInt8>, _ lowered: String.UTF8View, prefixOnly: Bool) -> Bool {
        var bytes = text.makeIterator()
        for expected in lowered {
            guard let byte = bytes.next() else { return false }
            let folded = byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte
            guard folded == expected else { return false }
        }
        return prefixOnly || bytes.next() == nil
    }
}
