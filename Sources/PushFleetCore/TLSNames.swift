#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The names a TLS certificate may be made for: DNS names (a leading `*.` allowed) or IP
/// addresses. Checked where names enter (flags, scenario files), before a certificate is built.
public enum TLSNames {
    /// The host names a mock push service answers for by default: Apple's production and
    /// sandbox hosts (and the sandbox alias some libraries use), Google's FCM and OAuth hosts,
    /// Microsoft's WNS OAuth and notify hosts, and the Web Push hosts of Mozilla and Apple
    /// (Chrome's are FCM's, Edge's are WNS's).
    public static let defaults = [
        "api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com",
        "fcm.googleapis.com", "oauth2.googleapis.com", "login.live.com", "*.notify.windows.com",
        "updates.push.services.mozilla.com", "web.push.apple.com",
    ]
    public static let maxCount = 100

    /// Every problem with `names`; empty when a certificate can be made for them.
    public static func problems(_ names: [String]) -> [String] {
        var problems: [String] = []
        if names.isEmpty { problems.append("at least one TLS name is needed") }
        if names.count > maxCount { problems.append("at most \(maxCount) TLS names, got \(names.count)") }
        for name in names where ipAddressBytes(name) == nil && !isDNSName(name) {
            problems.append("'\(name.prefix(80))' is neither a DNS name (a leading *. allowed) nor an IP address")
        }
        return problems
    }

    public static func isDNSName(_ name: String) -> Bool {
        let body = name.hasPrefix("*.") ? String(name.dropFirst(2)) : name
        guard (1...253).contains(body.utf8.count) else { return false }
        return body.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            (1...63).contains(label.utf8.count) && label.first != "-" && label.last != "-"
                && label.utf8.allSatisfy { $0 == 45 || (48...57).contains($0) || (97...122).contains($0) || (65...90).contains($0) }
        }
    }

    /// The address's bytes (4 or 16) when `text` is an IPv4 or IPv6 literal.
    public static func ipAddressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
