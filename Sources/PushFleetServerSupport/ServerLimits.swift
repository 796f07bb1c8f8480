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
    /// The longest pause while a request body arrives.
    public var bodyTimeout: Duration

    public init(
        maxConnections: Int? = nil,
        idleTimeout: Duration = .seconds(75),
        headerTimeout: Duration = .seconds(60),
        bodyTimeout: Duration = .seconds(60)
    ) {
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        self.bodyTimeout = bodyTimeout
    }

    /// The bounds every value must be within (checked where a value enters).
    public static let connectionRange = 1...1_000_000
    public static let timeoutRange: ClosedRange<Duration> = .milliseconds(100)...(.seconds(86_400))

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
        return problems
    }
}
