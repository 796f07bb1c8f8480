import PushFleetCore
import Yams

extension ScenarioLoader {
    /// `network: {keepalive: {ping, dead_after}, faults: [{link, at, for, share, loss | partition, flap}]}`.
    static func readNetwork(_ node: Node, _ r: NodeReader) -> Scenario.Network? {
        guard let map = r.mapping(node, "network", allowed: ["keepalive", "faults", "gateway_ping"]) else { return nil }
        var network = Scenario.Network()
        if let pingNode = map["gateway_ping"], let ping = r.duration(pingNode, "network.gateway_ping") {
            if Scenario.Keepalive.range.contains(ping) {
                network.gatewayPing = ping
            } else {
                r.report(pingNode, "network.gateway_ping", "must be between 100ms and 1h, got \(DurationText.format(ping))")
            }
        }
        if let keepNode = map["keepalive"] { network.keepalive = readKeepalive(keepNode, r) }
        if let faultsNode = map["faults"], let items = r.sequence(faultsNode, "network.faults", "network faults") {
            network.faults = items.enumerated().compactMap { readNetworkFault($1, "network.faults[\($0)]", r) }
        }
        return network
    }

    private static func readKeepalive(_ node: Node, _ r: NodeReader) -> Scenario.Keepalive? {
        let path = "network.keepalive"
        guard let map = r.mapping(node, path, allowed: ["ping", "dead_after", "acks"]) else { return nil }
        guard let pingNode = map["ping"], let ping = r.duration(pingNode, "\(path).ping"),
            let deadNode = map["dead_after"], let dead = r.duration(deadNode, "\(path).dead_after")
        else {
            if map["ping"] == nil || map["dead_after"] == nil {
                r.report(node, path, "give both ping (how often a device pings) and dead_after (silence after which it gives the socket up)")
            }
            return nil
        }
        let range = Scenario.Keepalive.range
        for (value, key, valueNode) in [(ping, "ping", pingNode), (dead, "dead_after", deadNode)] where !range.contains(value) {
            r.report(valueNode, "\(path).\(key)", "must be between 100ms and 1h, got \(DurationText.format(value))")
            return nil
        }
        guard dead > ping else {
            r.report(deadNode, "\(path).dead_after", "must be longer than ping (\(DurationText.format(ping))): a device must have pinged before it gives up")
            return nil
        }
        var acks = true
        if let acksNode = map["acks"] {
            guard let value = r.bool(acksNode, "\(path).acks") else { return nil }
            acks = value
        }
        return Scenario.Keepalive(ping: ping, deadAfter: dead, acks: acks)
    }

    private static func readNetworkFault(_ node: Node, _ path: String, _ r: NodeReader) -> Scenario.NetworkFault? {
        guard let map = r.mapping(node, path, allowed: ["link", "at", "for", "share", "flap", "jitter"] + kindKeys) else { return nil }
        var ok = true
        func required(_ key: String, _ meaning: String) -> Node? {
            if let value = map[key] { return value }
            r.report(node, "\(path).\(key)", "required: \(meaning)")
            ok = false
            return nil
        }
        let link = required("link", "the link to fault (phone, backend_push or fleet_backend)").flatMap { r.choice($0, "\(path).link", Scenario.NetworkFault.Link.self) }
        let at = required("at", "when, from the start of traffic").flatMap { r.duration($0, "\(path).at", allowZero: true) }
        let length = required("for", "how long the fault lasts").flatMap { r.duration($0, "\(path).for") }
        var share = 1.0
        if let shareNode = map["share"] {
            guard let value = r.ratio(shareNode, "\(path).share") else { return nil }
            guard value > 0 else {
                r.report(shareNode, "\(path).share", "a fault on no device does nothing; give a share above 0")
                return nil
            }
            share = value
        }
        var kind: Scenario.NetworkFault.Kind?
        let kinds = kindKeys.filter { map[$0] != nil }
        if kinds.count > 1 {
            r.report(node, path, "give one of \(kinds.joined(separator: ", ")): one fault, one kind (two faults of the same share touch the same devices)")
        } else if let lossNode = map["loss"] {
            if let ratio = r.ratio(lossNode, "\(path).loss") {
                if ratio > 0 { kind = .loss(ratio) } else { r.report(lossNode, "\(path).loss", "a loss of 0 does nothing; give a share above 0") }
            }
        } else if let partitionNode = map["partition"] {
            kind = r.choice(partitionNode, "\(path).partition", Scenario.NetworkFault.Direction.self).map { .partition($0) }
        } else if let latencyNode = map["latency"] {
            kind = readLinkLatency(latencyNode, jitter: map["jitter"], path, r)
        } else if let toxic = kinds.first {
            kind = readToxic(toxic, map[toxic]!, path, r)
        } else {
            r.report(
                node, path,
                "give what the link does: loss: N% (packets dropped at random), partition: both | to_device | from_device (phone), both | to_push_service | from_push_service (backend_push), both | to_backend | from_backend (fleet_backend); on the phone link also latency: D (with jitter: D), bandwidth: N KB/s, slicer: {size, delay}, slow_close: D, timeout: D, reset_peer: D"
            )
        }
        if let jitterNode = map["jitter"], map["latency"] == nil { r.report(jitterNode, "\(path).jitter", "jitter goes with latency") }
        var flap: Scenario.NetworkFault.Flap?
        if let flapNode = map["flap"], let flapMap = r.mapping(flapNode, "\(path).flap", allowed: ["down", "up"]) {
            if let down = flapMap["down"].flatMap({ r.duration($0, "\(path).flap.down") }), let up = flapMap["up"].flatMap({ r.duration($0, "\(path).flap.up") }) {
                flap = Scenario.NetworkFault.Flap(down: down, up: up)
            } else if flapMap["down"] == nil || flapMap["up"] == nil {
                r.report(flapNode, "\(path).flap", "give down (how long the link is faulted) and up (how long it is clear) each time round")
            }
        }
        guard ok, let link, let at, let length, let kind else { return nil }
        if link != .phone {
            if map["share"] != nil && share < 1 {
                r.report(map["share"], "\(path).share", "\(link.rawValue) is one link every device's traffic shares: a fault takes all of it (leave share out)")
                return nil
            }
            if kind.isToxic, let key = kinds.first {
                r.report(map[key], "\(path).\(key)", "\(key) is made by the run's proxy, on the phone link only; on \(link.rawValue) give loss or partition")
                return nil
            }
        }
        if case .partition(let direction) = kind, !link.directions.contains(direction) {
            r.report(
                map["partition"], "\(path).partition",
                "\(direction.rawValue) is not an end of the \(link.rawValue) link: give " + link.directions.map(\.rawValue).joined(separator: ", ")
            )
            return nil
        }
        for (value, key) in [(at, "at"), (length, "for")] where value > Scenario.NetworkFault.longest {
            r.report(map[key], "\(path).\(key)", "may be at most 24h, got \(DurationText.format(value))")
            return nil
        }
        if let flap, flap.down + flap.up > length {
            r.report(map["flap"], "\(path).flap", "one round (down + up) is longer than the fault's window (\(DurationText.format(length)))")
        }
        return Scenario.NetworkFault(link: link, kind: kind, at: at, duration: length, share: share, flap: flap)
    }

    /// The keys that name what a fault does; one per fault.
    static let kindKeys = ["loss", "partition", "latency", "bandwidth", "slicer", "slow_close", "timeout", "reset_peer"]

    /// The proxy's other toxics: `bandwidth: 64KB/s`, `slicer: {size: 16, delay: 1ms}`,
    /// `slow_close: 2s`, `timeout: 5s` (0s: never closed), `reset_peer: 1s`.
    private static func readToxic(_ key: String, _ node: Node, _ path: String, _ r: NodeReader) -> Scenario.NetworkFault.Kind? {
        let at = "\(path).\(key)"
        switch key {
        case "bandwidth":
            guard let text = r.string(node, at) else { return nil }
            guard let rate = bytesPerSecond(text), (1...1_000_000_000).contains(rate) else {
                r.report(node, at, "give a rate from 1B/s to 1000MB/s, as 64KB/s (B, KB = 1000 B or MB per second), got '\(text)'")
                return nil
            }
            return .bandwidth(bytesPerSecond: rate)
        case "slicer":
            guard let map = r.mapping(node, at, allowed: ["size", "delay"]) else { return nil }
            guard let sizeNode = map["size"], let delayNode = map["delay"] else {
                r.report(node, at, "give size (bytes a piece, 1–65536) and delay (between pieces)")
                return nil
            }
            guard let size = r.int(sizeNode, "\(at).size", in: 1...65_536), let delay = r.duration(delayNode, "\(at).delay", allowZero: true) else { return nil }
            guard delay <= .seconds(10) else {
                r.report(delayNode, "\(at).delay", "may be at most 10s, got \(DurationText.format(delay))")
                return nil
            }
            return .slicer(size: size, delay: delay)
        default:
            guard let value = r.duration(node, at, allowZero: key == "timeout") else { return nil }
            guard value <= .seconds(3600) else {
                r.report(node, at, "may be at most 1h, got \(DurationText.format(value))")
                return nil
            }
            switch key {
            case "slow_close": return .slowClose(value)
            case "timeout": return .timeout(value)
            default: return .resetPeer(value)
            }
        }
    }

    /// `64KB/s`, `1.5MB/s`, `800B/s` (decimal units, as Toxiproxy's bandwidth toxic).
    static func bytesPerSecond(_ text: String) -> Int? {
        let trimmed = String(text.filter { $0 != " " })
        guard trimmed.hasSuffix("/s") else { return nil }
        let amount = trimmed.dropLast(2)
        for (unit, scale) in [("MB", 1_000_000.0), ("KB", 1000.0), ("B", 1.0)] where amount.hasSuffix(unit) {
            guard let number = Double(amount.dropLast(unit.count)), number.isFinite, number > 0 else { return nil }
            let bytes = number * scale
            return bytes <= 1e12 ? Int(bytes.rounded()) : nil
        }
        return nil
    }

    /// `latency: 200ms` with `jitter: 100ms`: each read held back 100–300 ms.
    private static func readLinkLatency(_ node: Node, jitter jitterNode: Node?, _ path: String, _ r: NodeReader) -> Scenario.NetworkFault.Kind? {
        guard let delay = r.duration(node, "\(path).latency", allowZero: true) else { return nil }
        var jitter = Duration.zero
        if let jitterNode {
            guard let value = r.duration(jitterNode, "\(path).jitter", allowZero: true) else { return nil }
            jitter = value
        }
        guard delay > .zero || jitter > .zero else {
            r.report(node, "\(path).latency", "a latency of 0 does nothing; give a delay above 0")
            return nil
        }
        guard delay + jitter <= .seconds(60) else {
            r.report(node, "\(path).latency", "latency plus jitter may be at most 60s, got \(DurationText.format(delay + jitter))")
            return nil
        }
        guard jitter <= delay else {
            r.report(jitterNode, "\(path).jitter", "jitter may be at most the latency (\(DurationText.format(delay))): a delay is never below 0")
            return nil
        }
        return .latency(delay, jitter: jitter)
    }

    /// What network faults need of the rest of the scenario.
    static func checkNetwork(_ scenario: Scenario, _ node: (String) -> Node?, _ r: NodeReader) {
        let network = scenario.network
        guard network.hasFaults else { return }
        // Every link's rules tell the devices' own sockets apart by their addresses.
        if scenario.fleet.pushChannel != .perDevice {
            r.report(node("network"), "network.faults", "network faults pick devices by their sockets' addresses: they need push_channel: per_device")
        }
        if !scenario.fleet.sourceAddresses.isEmpty {
            r.report(node("network"), "network.faults", "network faults give each device an address of its own; leave fleet.source_addresses out")
        }
        let devices = scenario.fleet.users * scenario.fleet.devicesPerUser.maximum
        if devices > NetworkFaultPlan.maxDevices {
            r.report(
                node("network"), "network.faults",
                "network faults number devices within one /16 of loopback addresses: at most \(NetworkFaultPlan.maxDevices) devices, this fleet may have \(devices)"
            )
        }
        if !scenario.lifecycle.contains(.connect) {
            r.report(node("network"), "network.faults", "network faults act on devices' sockets to the gateway: the lifecycle needs connect")
        }
        if network.faults.contains(where: { $0.link == .backendPush }), case .external(_, .url(let pns)) = scenario.target {
            r.report(
                node("network"), "network.faults",
                "backend_push faults need the push service to be the run's own (target embedded, or pns: embedded), so that its own reports pass the link; \(pns) is not"
            )
        }
    }
}
