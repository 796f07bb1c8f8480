import PushFleetCore
import Foundation
import Yams

extension ScenarioLoader {
    static func readFleet(_ node: Node, _ r: NodeReader) -> Scenario.Fleet? {
        let keys = ["users", "devices_per_user", "platforms", "arrival", "push_channel", "http", "connections", "departure", "credentials", "source_addresses", "reregister_every"]
        guard let map = r.mapping(node, "fleet", allowed: keys) else { return nil }
        guard let usersNode = map["users"] else {
            r.report(node, "fleet.users", "required key is missing")
            return nil
        }
        guard let users = r.int(usersNode, "fleet.users", in: 1...10_000_000) else { return nil }
        var fleet = Scenario.Fleet(users: users)
        if let node = map["devices_per_user"] {
            if let range = node.mapping {
                _ = range
                if let bounds = r.mapping(node, "fleet.devices_per_user", allowed: ["min", "max"]),
                    let low = bounds["min"].flatMap({ r.int($0, "fleet.devices_per_user.min", in: 0...100) }),
                    let high = bounds["max"].flatMap({ r.int($0, "fleet.devices_per_user.max", in: 1...100) })
                {
                    if low > high {
                        r.report(node, "fleet.devices_per_user", "min (\(low)) must not exceed max (\(high))")
                    } else {
                        fleet.devicesPerUser = .uniform(min: low, max: high)
                    }
                } else if r.issues.isEmpty {
                    r.report(node, "fleet.devices_per_user", "expected a number or {min: N, max: M}")
                }
            } else if let count = r.int(node, "fleet.devices_per_user", in: 1...100) {
                fleet.devicesPerUser = .fixed(count)
            }
        }
        // Both factors are bounded above, so the product fits.
        let devices = users * fleet.devicesPerUser.maximum
        if devices > Scenario.Fleet.maximumDevices {
            r.report(
                map["devices_per_user"] ?? usersNode, map["devices_per_user"] == nil ? "fleet.users" : "fleet.devices_per_user",
                "a fleet may have at most \(Scenario.Fleet.maximumDevices) devices (users × devices per user), got up to \(devices)"
            )
        }
        if let node = map["platforms"],
            let weights = r.mapping(node, "fleet.platforms", allowed: Scenario.PlatformName.allCases.map(\.rawValue))
        {
            var parsed: [Scenario.PlatformName: Double] = [:]
            for (key, value) in weights {
                if let weight = r.number(value, "fleet.platforms.\(key)", in: 0...1_000_000) {
                    parsed[Scenario.PlatformName(rawValue: key)!] = weight
                }
            }
            if parsed.values.reduce(0, +) <= 0 {
                r.report(node, "fleet.platforms", "at least one platform needs a weight above 0")
            } else {
                fleet.platforms = parsed.filter { $0.value > 0 }
            }
        }
        if let node = map["arrival"] { fleet.arrival = readProfile(node, "fleet.arrival", r, requireDuration: false) }
        if let node = map["push_channel"], let value = r.choice(node, "fleet.push_channel", Scenario.PushChannel.self) {
            fleet.pushChannel = value
        }
        if let node = map["http"], let value = r.choice(node, "fleet.http", Scenario.HTTPMode.self) { fleet.http = value }
        if let node = map["connections"], let value = r.int(node, "fleet.connections", in: 1...20_000) { fleet.connections = value }
        if let node = map["credentials"], let path = r.string(node, "fleet.credentials") {
            fleet.names = readCredentials(path, node: node, users: users, r)
        }
        if let node = map["source_addresses"], let items = r.sequence(node, "fleet.source_addresses", "local IP addresses") {
            for (index, item) in items.enumerated() {
                guard let text = r.string(item, "fleet.source_addresses[\(index)]") else { continue }
                if isIPAddress(text) {
                    fleet.sourceAddresses.append(text)
                } else {
                    r.report(item, "fleet.source_addresses[\(index)]", "'\(text)' is not an IPv4 or IPv6 address")
                }
            }
        }
        if let node = map["reregister_every"], let every = r.duration(node, "fleet.reregister_every") {
            if every < .milliseconds(100) || every > .seconds(86_400) {
                r.report(node, "fleet.reregister_every", "must be between 100ms and 24h")
            } else {
                fleet.reregisterEvery = every
            }
        }
        if let node = map["departure"], let departure = r.mapping(node, "fleet.departure", allowed: ["share", "at"]) {
            if let share = departure["share"].flatMap({ r.ratio($0, "fleet.departure.share") }),
                let at = departure["at"].flatMap({ r.duration($0, "fleet.departure.at", allowZero: true) })
            {
                fleet.departure = .init(share: share, at: at)
            } else if departure["share"] == nil || departure["at"] == nil {
                r.report(node, "fleet.departure", "needs both share and at")
            }
        }
        return fleet
    }

    private static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// A credentials file: `user:password` lines (blank lines and `#` comments ignored), at least
    /// one per fleet user. A relative path is taken from the scenario file's folder.
    private static func readCredentials(_ path: String, node: Node, users: Int, _ r: NodeReader) -> FleetNames {
        let resolved = path.hasPrefix("/") ? path : ((r.file as NSString).deletingLastPathComponent as NSString).appendingPathComponent(path)
        guard let text = try? String(contentsOfFile: resolved, encoding: .utf8) else {
            r.report(node, "fleet.credentials", "cannot read '\(resolved)'")
            return FleetNames()
        }
        var credentials: [FleetNames.Credential] = []
        // Windows line ends and a byte-order mark are not part of any name or password.
        let body = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
        for (number, raw) in body.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                r.report(node, "fleet.credentials", "\(resolved) line \(number + 1): expected user:password")
                return FleetNames()
            }
            credentials.append(.init(user: String(line[..<colon]), password: String(line[line.index(after: colon)...])))
        }
        if credentials.count < users {
            r.report(node, "fleet.credentials", "\(resolved) has \(credentials.count) users; the fleet needs \(users)")
        }
        if Set(credentials.map(\.user)).count != credentials.count {
            r.report(node, "fleet.credentials", "\(resolved) names a user twice")
        }
        return FleetNames(credentials: credentials)
    }
}
