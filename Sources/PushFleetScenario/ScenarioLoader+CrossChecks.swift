import PushFleetCore
import Yams

extension ScenarioLoader {
    /// What the sections read must agree on, reported where they disagree.
    static func validate(_ scenario: Scenario, root: Node, reader r: NodeReader, overrides: ScenarioOverrides) {
        let top = root.mapping
        func node(_ key: String) -> Node? { top?[Node(key)] }
        let steps = scenario.lifecycle
        func require(_ step: Scenario.LifecycleStep, for other: Scenario.LifecycleStep) {
            if steps.contains(other) && !steps.contains(step) {
                r.report(node("lifecycle"), "lifecycle", "'\(other.rawValue)' needs '\(step.rawValue)'")
            }
        }
        checkNetwork(scenario, node, r)
        require(.register, for: .connect)
        require(.connect, for: .receive)
        require(.receive, for: .fetchSecure)
        require(.receive, for: .fetchRich)
        if let capacity = scenario.capacity {
            if scenario.traffic.isEmpty {
                r.report(node("capacity"), "capacity", "a capacity search needs a traffic entry whose rate it varies or keeps")
            } else if let name = capacity.traffic, !scenario.traffic.contains(where: { $0.name == name }) {
                r.report(node("capacity"), "capacity.traffic", "no traffic entry named '\(name)' (there are \(scenario.traffic.map(\.name).joined(separator: ", ")))")
            } else {
                // A step plans every send up front: the largest must fit what a sender may plan.
                let rate = capacity.vary == .rate ? capacity.maximum : scenario.capacityDevicesRate?.perSecond ?? 0
                let sends = rate * (capacity.warmup + capacity.window).seconds
                if sends > Double(Scenario.Traffic.maximumSends) {
                    r.report(
                        node("capacity"), "capacity",
                        "the largest step would plan \(Int(sends)) sends, over the \(Scenario.Traffic.maximumSends) a sender may: lower max or shorten warmup and window"
                    )
                }
                if capacity.vary == .devices && rate <= 0 {
                    r.report(node("capacity"), "capacity.rate", "a devices search needs a send rate above 0: give capacity.rate")
                }
            }
        }
        var names = Set<String>()
        for (index, traffic) in scenario.traffic.enumerated() {
            let path = "traffic[\(index)]"
            let item = node("traffic")?.sequence?[index]
            if !names.insert(traffic.name).inserted { r.report(item, "\(path).name", "duplicate sender name '\(traffic.name)'") }
            if traffic.kind == .secure && !steps.contains(.fetchSecure) {
                r.report(item, "\(path).kind", "secure sends carry only an id; add fetch_secure to lifecycle to attribute them")
            }
            if !steps.contains(.receive) {
                r.report(item, path, "traffic needs devices that receive; add connect and receive to lifecycle")
            }
            for party in [traffic.from, traffic.to] {
                let users: [String]
                switch party {
                case .user(let name): users = [name]
                case .group(let group): users = group
                default: users = []
                }
                for user in users where scenario.fleet.names.userIndex(user, users: scenario.fleet.users) == nil {
                    r.report(item, path, "no user '\(user)' in a fleet of \(scenario.fleet.users) (users are \(scenario.fleet.names.user(0))…\(scenario.fleet.names.user(scenario.fleet.users - 1)))")
                }
            }
        }
        if case .external(_, .url(let pns)) = scenario.target, pns.hasPrefix("https:"), scenario.fleet.pushChannel == .perDevice,
            scenario.lifecycle.contains(.connect)
        {
            r.report(node("target"), "target.pns", "devices' own sockets speak plain ws://; give an http:// push service or use push_channel: multiplexed")
        }
        let pushFaults = scenario.faults.contains { $0.drop != nil || $0.throttle != nil || $0.latency != nil || $0.unregisteredRatio != nil || $0.disconnect != nil }
        if pushFaults, case .external(_, .url) = scenario.target {
            r.report(node("faults"), "faults", "faults need the embedded push service (or one with its /admin API); the target's pns is external")
        }
        if scenario.faults.contains(where: { $0.backend != nil || $0.backendSendLatency != nil || $0.backendFetchLatency != nil }),
            scenario.target != .embedded
        {
            r.report(node("faults"), "faults", "backend: restart and backend_latency need the embedded backend (target: embedded)")
        }
        if scenario.embedded.hub, scenario.target != .embedded {
            // Named when the command line set it, so the user knows which of the two said it.
            let fromFlag = overrides.hub == true
            r.report(
                fromFlag ? node("target") : node("embedded"), "embedded.hub",
                "the hub is the embedded backend's way to send; the target is an external backend"
                    + (fromFlag ? " (--hub needs the embedded target)" : "")
            )
        }
        validateAPI(scenario, node: node, r)
        if scenario.embedded.tls != nil, case .external(_, .url) = scenario.target {
            r.report(node("embedded"), "embedded.tls", "TLS is the embedded push service's; the target's pns is external")
        }
        if scenario.embedded.store != .memory, scenario.target != .embedded {
            r.report(node("embedded"), "embedded.store", "the store is the embedded backend's; the target is an external backend")
        }
    }
}
