#if canImport(Glibc)
import Glibc
#endif
import PushFleetBackend
import PushFleetMockPush
import PushFleetServerSupport

/// How many connections each port of the system takes, out of the open-files limit, said before
/// anything connects: a fleet larger than the push service's device cap is told at start, not
/// left to find out through timeouts.
extension EmbeddedSystem {
    /// The push service's HTTP/1.1 port's share of the open-files limit: it holds a socket per
    /// device.
    static let pushShare = 0.5

    /// The device cap the embedded push service gets under the open-files limit in force now,
    /// with no connection cap configured (as ``init(configuration:)`` resolves it).
    public static func defaultDeviceCap() -> Int {
        MockPushServer.Configuration.deviceCap(total: ServerLimits.defaultMaxConnections(share: pushShare))
    }

    /// One line per port with the connections it serves at once and, on the push service's
    /// gateway ports, the device sockets among them; then the open-files limit they come from.
    public func connectionCaps() -> [String] {
        let backendCap = configuration.backend.server.maxConnections.map(Self.grouped) ?? "?"
        var lines = ["backend connections: \(backendCap) at once"]
        guard let pushServer else { return lines }
        let push = pushServer.configuration
        let total = push.limits.maxConnections ?? ServerLimits.defaultMaxConnections()
        lines.append(
            "push service connections: \(Self.grouped(total)) at once, of which device sockets \(Self.grouped(push.deviceCap)) "
                + "(the other \(Self.grouped(max(0, total - push.deviceCap))) kept for providers, hub and admin); "
                + "a device past it gets 503 at once"
        )
        if push.http2Listen != nil, let h2 = push.http2Limits.maxConnections {
            lines.append("push h2c connections: \(Self.grouped(h2)) at once")
        }
        if let tls = push.tls, let tlsTotal = tls.limits.maxConnections, let tlsDevices = push.tlsDeviceCap {
            lines.append("push TLS connections: \(Self.grouped(tlsTotal)) at once, of which device sockets \(Self.grouped(tlsDevices))")
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max {
            lines.append(
                "open-files limit: \(Self.grouped(Int(limit.rlim_cur))) (hard \(limit.rlim_max == rlim_t.max ? "unlimited" : Self.grouped(Int(limit.rlim_max)))); "
                    + "for more devices raise it (ulimit -n), or carry devices on shared sockets (/gateway)"
            )
        }
        return lines
    }

    /// 9968 as 9,968, whatever the locale.
    static func grouped(_ value: Int) -> String {
        var digits = Array(String(value.magnitude))
        var index = digits.count - 3
        while index > 0 {
            digits.insert(",", at: index)
            index -= 3
        }
        return (value < 0 ? "-" : "") + String(digits)
    }
}
