import PushFleetCore
import Foundation
import Yams

extension ScenarioLoader {
    /// `{rate: R, duration: D}` (constant), or `{start_rate: R, stages: [{duration: D, target: R}]}`.
    static func readProfile(_ node: Node, _ path: String, _ r: NodeReader, requireDuration: Bool) -> LoadProfile? {
        guard let map = r.mapping(node, path, allowed: ["rate", "duration", "start_rate", "stages"]) else { return nil }
        return readProfile(map, node, path, r, requireDuration: requireDuration)
    }

    static func readProfile(_ map: [String: Node], _ node: Node, _ path: String, _ r: NodeReader, requireDuration: Bool) -> LoadProfile? {
        if let stagesNode = map["stages"] {
            if map["rate"] != nil {
                r.report(map["rate"], "\(path).rate", "give either rate or stages, not both")
            }
            let start = map["start_rate"].flatMap { r.rate($0, "\(path).start_rate") } ?? Rate(perSecond: 0)
            guard let items = r.sequence(stagesNode, "\(path).stages", "{duration, target} stages") else { return nil }
            var stages: [Stage] = []
            for (index, item) in items.enumerated() {
                let stagePath = "\(path).stages[\(index)]"
                guard let stage = r.mapping(item, stagePath, allowed: ["duration", "target"]) else { continue }
                guard let durationNode = stage["duration"], let targetNode = stage["target"] else {
                    r.report(item, stagePath, "each stage needs duration and target")
                    continue
                }
                if let duration = r.duration(durationNode, "\(stagePath).duration"), let target = r.rate(targetNode, "\(stagePath).target") {
                    stages.append(Stage(duration: duration, target: target))
                }
            }
            guard !stages.isEmpty else {
                r.report(stagesNode, "\(path).stages", "needs at least one stage")
                return nil
            }
            return LoadProfile(startRate: start, stages: stages)
        }
        guard let rateNode = map["rate"] else {
            r.report(node, "\(path).rate", "required: a rate (e.g. 100/s), or stages")
            return nil
        }
        guard let rate = r.rate(rateNode, "\(path).rate") else { return nil }
        if rate.perSecond <= 0 {
            r.report(rateNode, "\(path).rate", "must be above 0")
            return nil
        }
        if let durationNode = map["duration"] {
            guard let duration = r.duration(durationNode, "\(path).duration") else { return nil }
            return .constant(rate, for: duration)
        }
        if requireDuration {
            r.report(node, "\(path).duration", "required with a constant rate")
            return nil
        }
        // Arrivals without a duration go on at this rate until the whole fleet is in.
        return .constant(rate, for: .seconds(0))
    }

    static func readTimeouts(_ node: Node, _ r: NodeReader, into timeouts: inout Scenario.Timeouts) {
        guard let map = r.mapping(node, "timeouts", allowed: ["login", "register", "connect", "send", "fetch"]) else { return }
        if let v = map["login"].flatMap({ r.duration($0, "timeouts.login") }) { timeouts.login = v }
        if let v = map["register"].flatMap({ r.duration($0, "timeouts.register") }) { timeouts.register = v }
        if let v = map["connect"].flatMap({ r.duration($0, "timeouts.connect") }) { timeouts.connect = v }
        if let v = map["send"].flatMap({ r.duration($0, "timeouts.send") }) { timeouts.send = v }
        if let v = map["fetch"].flatMap({ r.duration($0, "timeouts.fetch") }) { timeouts.fetch = v }
    }

    static func readTraffic(_ node: Node, _ path: String, index: Int, _ r: NodeReader) -> Scenario.Traffic? {
        let keys = ["name", "kind", "from", "to", "platforms", "rate", "duration", "start_rate", "stages", "start", "max_in_flight"]
        guard let map = r.mapping(node, path, allowed: keys) else { return nil }
        guard let kindNode = map["kind"] else {
            r.report(node, "\(path).kind", "required: plain, secure or rich")
            return nil
        }
        let kind = r.choice(kindNode, "\(path).kind", Scenario.Traffic.Kind.self)
        let profileMap = map.filter { ["rate", "duration", "start_rate", "stages"].contains($0.key) }
        let profile = readProfile(profileMap, node, path, r, requireDuration: true)
        guard let kind, let profile else { return nil }
        guard profile.expectedCount <= Double(Scenario.Traffic.maximumSends) else {
            r.report(node, path, "plans about \(String(format: "%.3g", profile.expectedCount)) sends; a sender may plan at most \(Scenario.Traffic.maximumSends) (rate × duration)")
            return nil
        }
        var traffic = Scenario.Traffic(name: map["name"].flatMap { r.string($0, "\(path).name") } ?? "\(kind.rawValue)-\(index + 1)", kind: kind, profile: profile)
        if let from = map["from"] { traffic.from = readParty(from, "\(path).from", r, allowSelf: false) ?? .randomUser }
        if let to = map["to"] { traffic.to = readParty(to, "\(path).to", r, allowSelf: true) ?? .randomUser }
        if let node = map["platforms"], let items = r.sequence(node, "\(path).platforms", "platforms") {
            traffic.platforms = items.enumerated().compactMap { r.choice($1, "\(path).platforms[\($0)]", Scenario.PlatformName.self) }
            if traffic.platforms.isEmpty { r.report(node, "\(path).platforms", "needs at least one platform") }
        }
        if let node = map["start"], let value = r.duration(node, "\(path).start", allowZero: true) { traffic.start = value }
        if let node = map["max_in_flight"], let value = r.int(node, "\(path).max_in_flight", in: 1...1_000_000) {
            traffic.maxInFlight = value
        }
        return traffic
    }

    private static func readParty(_ node: Node, _ path: String, _ r: NodeReader, allowSelf: Bool) -> Scenario.Traffic.Party? {
        if let text = node.string {
            switch text {
            case "random_user": return .randomUser
            case "self" where allowSelf: return .selfUser
            default:
                let options = allowSelf ? ["random_user", "self"] : ["random_user"]
                r.report(node, path, "'\(text)' is not one of \(options.joined(separator: ", ")), {user: NAME} or {group: [NAMES]}",
                    suggestion: closest(to: text, in: options))
                return nil
            }
        }
        guard let map = r.mapping(node, path, allowed: ["user", "group"]) else { return nil }
        if let user = map["user"] { return r.string(user, "\(path).user").map { .user($0) } }
        if let group = map["group"], let items = r.sequence(group, "\(path).group", "user names") {
            let names = items.enumerated().compactMap { r.string($1, "\(path).group[\($0)]") }
            guard !names.isEmpty else {
                r.report(group, "\(path).group", "needs at least one user")
                return nil
            }
            return .group(names)
        }
        r.report(node, path, "expected {user: NAME} or {group: [NAMES]}")
        return nil
    }
}
