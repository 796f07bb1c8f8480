import Foundation
import PushFleetCore
import Yams

extension ScenarioLoader {
    /// `capacity:`: what to vary, the ladder from `start` to `max`, the bisection's resolution,
    /// each step's warm-up and window, and the repeats of the bracketing steps.
    static func readCapacity(_ node: Node, _ r: NodeReader) -> Scenario.Capacity? {
        let keys = ["vary", "traffic", "start", "max", "factor", "resolution", "warmup", "window", "repeats", "rate", "require"]
        guard let map = r.mapping(node, "capacity", allowed: keys) else { return nil }
        let vary = map["vary"].flatMap { r.choice($0, "capacity.vary", Scenario.Capacity.Vary.self) } ?? .rate
        func load(_ key: String) -> Double? {
            guard let node = map[key] else { return nil }
            switch vary {
            case .rate:
                guard let rate = r.rate(node, "capacity.\(key)") else { return nil }
                guard Scenario.Capacity.rateRange.contains(rate.perSecond) else {
                    r.report(node, "capacity.\(key)", "a step's rate must be between 0.1/s and 1000000/s, got \(rate)")
                    return nil
                }
                return rate.perSecond
            case .devices:
                return r.int(node, "capacity.\(key)", in: 1...Scenario.Fleet.maximumDevices).map(Double.init)
            }
        }
        let unit = vary == .rate ? "a rate such as 100/s" : "a number of devices"
        guard let start = load("start") else {
            if map["start"] == nil { r.report(node, "capacity.start", "required: the first step, \(unit)") }
            return nil
        }
        guard let maximum = load("max") else {
            if map["max"] == nil { r.report(node, "capacity.max", "required: the ladder's highest step, \(unit)") }
            return nil
        }
        guard maximum > start else {
            r.report(map["max"], "capacity.max", "must be above capacity.start")
            return nil
        }
        var capacity = Scenario.Capacity(vary: vary, start: start, maximum: maximum)
        if let node = map["traffic"] { capacity.traffic = r.string(node, "capacity.traffic") }
        if let node = map["factor"], let value = r.number(node, "capacity.factor", in: Scenario.Capacity.factorRange) { capacity.factor = value }
        if let node = map["resolution"], let value = readShare(node, "capacity.resolution", r) {
            if Scenario.Capacity.resolutionRange.contains(value) {
                capacity.resolution = value
            } else {
                r.report(node, "capacity.resolution", "must be between 0.5% and 50%")
            }
        }
        if let node = map["warmup"], let value = r.duration(node, "capacity.warmup", allowZero: true) {
            if Scenario.Capacity.warmupRange.contains(value) { capacity.warmup = value } else { r.report(node, "capacity.warmup", "at most 10m") }
        }
        if let node = map["window"], let value = r.duration(node, "capacity.window") {
            if Scenario.Capacity.windowRange.contains(value) { capacity.window = value } else { r.report(node, "capacity.window", "between 1s and 1h") }
        }
        if let node = map["repeats"], let value = r.int(node, "capacity.repeats", in: Scenario.Capacity.repeatsRange) { capacity.repeats = value }
        if let node = map["rate"] {
            if vary == .rate {
                r.report(node, "capacity.rate", "goes with vary: devices (with vary: rate the rate is what varies)")
            } else if let rate = r.rate(node, "capacity.rate") {
                if Scenario.Capacity.rateRange.contains(rate.perSecond) {
                    capacity.rate = rate
                } else {
                    r.report(node, "capacity.rate", "must be between 0.1/s and 1000000/s, got \(rate)")
                }
            }
        }
        if map["require"] != nil { capacity.require = load("require") }
        // The ladder, the bisection and the repeats must fit the search's step budget.
        let ladder = (log(capacity.maximum / capacity.start) / log(capacity.factor)).rounded(.up) + 1
        let bisection = max(0, log2(log(capacity.factor) / log(1 + capacity.resolution)).rounded(.up))
        let needed = Int(ladder + bisection) + 2 * (capacity.repeats - 1)
        if needed > Scenario.Capacity.maximumSteps {
            r.report(node, "capacity", "this search needs up to \(needed) steps, over the \(Scenario.Capacity.maximumSteps) a search makes: raise start or factor, or lower max, resolution or repeats")
        }
        return capacity
    }

    /// `5%` or `0.05`.
    private static func readShare(_ node: Node, _ path: String, _ r: NodeReader) -> Double? {
        if let text = node.string, text.hasSuffix("%"), let value = Double(text.dropLast().trimmingCharacters(in: .whitespaces)), value.isFinite {
            return value / 100
        }
        return r.number(node, path, in: 0...1)
    }
}
