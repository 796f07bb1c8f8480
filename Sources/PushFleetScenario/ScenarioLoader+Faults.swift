import PushFleetCore
import Yams

extension ScenarioLoader {
    static func readFault(_ node: Node, _ path: String, _ r: NodeReader) -> Scenario.FaultStep? {
        guard let map = r.mapping(node, path, allowed: ["at", "pns", "disconnect", "backend", "down_for", "backend_latency", "backend_send_rate", "backend_send_queue"]) else { return nil }
        guard let atNode = map["at"], let at = r.duration(atNode, "\(path).at", allowZero: true) else {
            if map["at"] == nil { r.report(node, "\(path).at", "required: when, from the start of traffic") }
            return nil
        }
        var step = Scenario.FaultStep(at: at)
        if let node = map["disconnect"] { step.disconnect = r.ratio(node, "\(path).disconnect") }
        if let pnsNode = map["pns"], let pns = r.mapping(pnsNode, "\(path).pns", allowed: ["drop", "throttle", "latency", "unregistered_ratio", "service_rate", "service_queue"]) {
            step.serviceRate = pns["service_rate"].flatMap { serviceRate($0, "\(path).pns.service_rate", r) }
            step.serviceQueue = pns["service_queue"].flatMap { r.int($0, "\(path).pns.service_queue", in: Scenario.FaultStep.serviceQueueRange) }
            if let node = pns["service_queue"], pns["service_rate"] == nil { r.report(node, "\(path).pns.service_queue", "service_queue goes with service_rate") }
            step.drop = pns["drop"].flatMap { r.ratio($0, "\(path).pns.drop") }
            step.throttle = pns["throttle"].flatMap { r.ratio($0, "\(path).pns.throttle") }
            step.unregisteredRatio = pns["unregistered_ratio"].flatMap { r.ratio($0, "\(path).pns.unregistered_ratio") }
            if let latency = pns["latency"] {
                step.latency = readLatency(latency, "\(path).pns.latency", r)
                if let spec = step.latency, Self.longest(spec) > .milliseconds(3_600_000) {
                    r.report(latency, "\(path).pns.latency", "an added latency may be at most 1h (mean plus stddev for normal)")
                }
            }
        }
        if let latencyNode = map["backend_latency"], let latency = r.mapping(latencyNode, "\(path).backend_latency", allowed: ["send", "fetch"]) {
            for (key, node) in latency {
                guard let spec = readLatency(node, "\(path).backend_latency.\(key)", r) else { continue }
                if Self.longest(spec) > .milliseconds(3_600_000) {
                    r.report(node, "\(path).backend_latency.\(key)", "an added latency may be at most 1h (mean plus stddev for normal)")
                    continue
                }
                if key == "send" { step.backendSendLatency = spec } else { step.backendFetchLatency = spec }
            }
            if latency.isEmpty { r.report(latencyNode, "\(path).backend_latency", "give send and/or fetch latencies") }
        }
        step.backendSendRate = map["backend_send_rate"].flatMap { serviceRate($0, "\(path).backend_send_rate", r) }
        step.backendSendQueue = map["backend_send_queue"].flatMap { r.int($0, "\(path).backend_send_queue", in: Scenario.FaultStep.serviceQueueRange) }
        if let node = map["backend_send_queue"], map["backend_send_rate"] == nil {
            r.report(node, "\(path).backend_send_queue", "backend_send_queue goes with backend_send_rate")
        }
        if let backendNode = map["backend"], let action = r.string(backendNode, "\(path).backend") {
            var down = Duration.zero
            if let downNode = map["down_for"], let value = r.duration(downNode, "\(path).down_for", allowZero: true) {
                if value > .seconds(3600) {
                    r.report(downNode, "\(path).down_for", "the backend may stay down at most 1h")
                } else {
                    down = value
                }
            }
            if action == "restart" {
                step.backend = .restart(downFor: down)
            } else {
                r.report(backendNode, "\(path).backend", "'\(action)' is not a backend fault; use restart")
            }
        } else if let downNode = map["down_for"] {
            r.report(downNode, "\(path).down_for", "down_for goes with backend: restart")
        }
        if step.disconnect == nil && step.drop == nil && step.throttle == nil && step.latency == nil && step.unregisteredRatio == nil
            && step.backend == nil && step.backendSendLatency == nil && step.backendFetchLatency == nil && step.serviceRate == nil
            && step.backendSendRate == nil
        {
            // A wrong backend action, latency or rate was reported already.
            if map["backend"] != nil || map["backend_latency"] != nil || map["backend_send_rate"] != nil || map["pns"]?.mapping?[Node("service_rate")] != nil
                || map["pns"]?.mapping?[Node("service_queue")] != nil || map["backend_send_queue"] != nil
            {
                return nil
            }
            r.report(
                node, path,
                "sets nothing; give pns knobs (drop, throttle, latency, unregistered_ratio, service_rate), disconnect, backend: restart, backend_latency or backend_send_rate"
            )
            return nil
        }
        return step
    }

    /// A service-rate knob: a rate such as 500/s, within what a knob may set.
    private static func serviceRate(_ node: Node, _ path: String, _ r: NodeReader) -> Rate? {
        guard let rate = r.rate(node, path) else { return nil }
        guard Scenario.FaultStep.serviceRateRange.contains(rate.perSecond) else {
            r.report(node, path, "a service rate must be between 0.001/s and 10000000/s, got \(rate)")
            return nil
        }
        return rate
    }

    /// The largest latency a spec names (mean + stddev for a normal one).
    static func longest(_ spec: Scenario.LatencySpec) -> Duration {
        switch spec {
        case .none: .zero
        case .fixed(let d): d
        case .uniform(_, let high): high
        case .normal(let mean, let sd): mean + sd
        }
    }

    /// `none`, `{fixed: 20ms}`, `{uniform: [5ms, 50ms]}` or `{normal: {mean: 20ms, stddev: 5ms}}`.
    private static func readLatency(_ node: Node, _ path: String, _ r: NodeReader) -> Scenario.LatencySpec? {
        if node.string == "none" { return Scenario.LatencySpec.none }
        guard let map = r.mapping(node, path, allowed: ["fixed", "uniform", "normal"]), map.count == 1, let (kind, value) = map.first else {
            r.report(node, path, "expected none, {fixed: D}, {uniform: [MIN, MAX]} or {normal: {mean: D, stddev: D}}")
            return nil
        }
        switch kind {
        case "fixed":
            return r.duration(value, "\(path).fixed", allowZero: true).map { .fixed($0) }
        case "uniform":
            guard let items = r.sequence(value, "\(path).uniform", "two durations"), items.count == 2,
                let low = r.duration(items[0], "\(path).uniform[0]", allowZero: true),
                let high = r.duration(items[1], "\(path).uniform[1]", allowZero: true)
            else {
                r.report(value, "\(path).uniform", "expected [MIN, MAX]")
                return nil
            }
            guard low <= high else {
                r.report(value, "\(path).uniform", "MIN must not exceed MAX")
                return nil
            }
            return .uniform(min: low, max: high)
        default:
            guard let normal = r.mapping(value, "\(path).normal", allowed: ["mean", "stddev"]),
                let mean = normal["mean"].flatMap({ r.duration($0, "\(path).normal.mean", allowZero: true) }),
                let sd = normal["stddev"].flatMap({ r.duration($0, "\(path).normal.stddev", allowZero: true) })
            else {
                r.report(value, "\(path).normal", "expected {mean: D, stddev: D}")
                return nil
            }
            return .normal(mean: mean, stddev: sd)
        }
    }
}
