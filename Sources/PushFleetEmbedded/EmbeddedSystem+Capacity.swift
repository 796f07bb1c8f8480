#if canImport(Glibc)
import Glibc
#endif
import PushFleetBackend
import PushFleetCore
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
        let backendCap = configuration.backend.server.maxConnections.map(\.grouped) ?? "?"
        var lines = ["backend connections: \(backendCap) at once"]
        guard let pushServer else { return lines }
        let push = pushServer.configuration
        let total = push.limits.maxConnections ?? ServerLimits.defaultMaxConnections()
        lines.append(
            "push service connections: \(total.grouped) at once, of which device sockets \(push.deviceCap.grouped) "
                + "(the other \(max(0, total - push.deviceCap).grouped) kept for providers, hub and admin); "
                + "a device past it gets 503 at once"
        )
        if push.http2Listen != nil, let h2 = push.http2Limits.maxConnections {
            lines.append("push h2c connections: \(h2.grouped) at once")
        }
        if let tls = push.tls, let tlsTotal = tls.limits.maxConnections, let tlsDevices = push.tlsDeviceCap {
            lines.append("push TLS connections: \(tlsTotal.grouped) at once, of which device sockets \(tlsDevices.grouped)")
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max {
            lines.append(
                "open-files limit: \(limit.rlim_cur.grouped) (hard \(limit.rlim_max == rlim_t.max ? "unlimited" : limit.rlim_max.grouped)); "
                    + "for more devices raise it (ulimit -n), or carry devices on shared sockets (/gateway)"
            )
        }
        return lines
    }

}
