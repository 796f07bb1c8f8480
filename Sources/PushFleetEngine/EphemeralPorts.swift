import Foundation

/// How many local ports one source address has for outgoing connections.
enum EphemeralPorts {
    static func count() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) else { return 28_232 }
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard bounds.count == 2, bounds[1] >= bounds[0] else { return 28_232 }
        return bounds[1] - bounds[0] + 1
    }
}
