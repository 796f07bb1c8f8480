import Foundation
public import PushFleetCore
import PushFleetLedger

extension CapacityStep {
    /// The step a capacity run's result makes: its window's numbers, or the whole run's when it
    /// has no window (a run that stopped before one).
    public static func from(
        _ result: RunResult, index: Int, phase: CapacitySearch.Phase, load: Double, verdict: CapacitySearch.Verdict, report: String
    ) -> CapacityStep {
        let window = result.window
        let histograms = window?.histograms ?? result.histograms
        let counts = window?.delivery ?? result.delivery
        func ms(_ name: String, _ p: Double) -> Double? {
            guard let histogram = histograms[name], histogram.count > 0 else { return nil }
            return Double(histogram.percentile(p)) / 1e6
        }
        var hops: [String: HopLatency] = [:]
        for name in MetricName.hops {
            guard let p50 = ms(name, 50), let p99 = ms(name, 99) else { continue }
            hops[String(name.dropFirst("hop.".count))] = HopLatency(p50Ms: p50, p99Ms: p99)
        }
        var errors: [String: Int] = [:]
        for row in result.errors { errors[row.errorClass] = row.count }
        var traces: [String: [String]] = [:]
        for incident in result.incidents ?? [] {
            guard let trace = result.traceID(of: incident), traces[incident.hop ?? "unknown", default: []].count < 3 else { continue }
            traces[incident.hop ?? "unknown", default: []].append(trace)
        }
        let ratio = { (part: Int) in counts.expected == 0 ? 0 : Double(part) / Double(counts.expected) }
        return CapacityStep(
            index: index, phase: phase.rawValue, load: load, verdict: verdict.rawValue, breaches: window?.breaches ?? [],
            generatorLimits: result.generator?.limits ?? [], offeredRate: window?.offeredRate ?? 0, throughput: window?.throughput ?? 0,
            devices: result.devices.ready, deliveryP50Ms: ms(MetricName.delivery, 50), deliveryP99Ms: ms(MetricName.delivery, 99),
            sendP99Ms: ms(MetricName.send, 99), lostRatio: ratio(counts.lost), lateRatio: ratio(counts.late), expected: counts.expected,
            lost: counts.lost, backlog: window?.backlog ?? [], hops: hops, why: Array((window?.hops ?? result.hops)?.why.prefix(10) ?? []),
            errors: errors, fleetCPUCores: result.generator?.cpuCores, durationSeconds: result.info.durationSeconds, report: report,
            traces: traces.isEmpty ? nil : traces
        )
    }
}

extension CapacityResult {
    /// How a hop is named in a sentence.
    static let hopNames = [
        "backend": "the backend's time to hand a push to the push service", "hub": "the hub's time", "push_service": "the push service's time",
        "device": "the devices' time to read a written push", "fetch": "the fetch of the content",
    ]

    /// Fills the capacity, bracket, spread, where it broke, knees, USL fit and summary from the
    /// steps and the search.
    public mutating func analyse(_ search: CapacitySearch, outcome: CapacitySearch.Outcome?) {
        lastPass = search.lastPass
        firstFail = search.firstFail
        generatorBoundAt = search.generatorBoundAt
        capacity = search.confirmed
        nonMonotonic = search.nonMonotonic
        if let required { meetsRequirement = (capacity ?? 0) >= required }
        spread = [lastPass, firstFail].compactMap { $0 }.map { load in
            let runs = steps.filter { $0.load == load }
            let p99s = runs.compactMap(\.deliveryP99Ms)
            return Spread(
                load: load, runs: runs.count, verdicts: runs.map(\.verdict), p99MinMs: p99s.min(), p99MaxMs: p99s.max(),
                throughputMin: runs.map(\.throughput).min() ?? 0, throughputMax: runs.map(\.throughput).max() ?? 0
            )
        }
        brokeAt = Self.brokeAt(steps, unit: unit)
        let curve = Self.curve(steps)
        // A knee only where the curve bends: throughput that falls 5% behind the load it follows,
        // a p99 that at least doubles. Kneedle finds a "knee" in any noise.
        let following = curve.filter { $0.expected > 0 && $0.load > 0 }.map { $0.throughput / $0.load }
        if curve.count >= 3, let most = following.max(), let least = following.min(), least < 0.95 * most {
            let loads = curve.map(\.load)
            kneeOfThroughput = Kneedle.knee(x: loads, y: curve.map(\.throughput), curve: .concave, direction: .increasing).map { loads[$0] }
        }
        let withP99 = curve.filter { $0.deliveryP99Ms != nil }
        let p99s = withP99.compactMap(\.deliveryP99Ms)
        if withP99.count >= 3, let top = p99s.max(), let bottom = p99s.min(), top >= 2 * bottom {
            kneeOfP99 = Kneedle.knee(x: withP99.map(\.load), y: p99s, curve: .convex, direction: .increasing).map { withP99[$0].load }
        }
        let valid = steps.filter { $0.verdict == "pass" || $0.verdict == "fail" }
        usl = vary == "rate" ? USLFit.fit(load: valid.map(\.load), throughput: valid.map(\.throughput)) : nil
        summary = sentence(outcome)
    }

    /// The first run of each load that the generator drove, by load.
    static func curve(_ steps: [CapacityStep]) -> [CapacityStep] {
        var seen = Set<Double>()
        return steps.filter { ($0.verdict == "pass" || $0.verdict == "fail") && seen.insert($0.load).inserted }.sorted { $0.load < $1.load }
    }

    /// The hop that broke, at the first failing load: where a thousandth of its pairs or more
    /// were lost, the hop that lost most; else a hop that refused as many (the push service's
    /// refusals, then the backend's failed sends); else the hop whose p99 grew most over its value at the
    /// lowest load (in milliseconds: what the SLO feels), when it at least doubled and grew by
    /// 5 ms. The sentence also says from which load that hop had grown.
    static func brokeAt(_ steps: [CapacityStep], unit: String) -> BrokeAt? {
        let curve = curve(steps)
        guard let base = curve.first, let step = curve.first(where: { $0.verdict == "fail" }) else { return nil }
        guard var broke = brokeAt(step, base: base, curve: curve, unit: unit) else { return nil }
        if let traces = step.traces?[broke.hop], !traces.isEmpty {
            broke.traces = traces
            broke.sentence += "; traces of pairs that went wrong there: " + traces.joined(separator: ", ")
        }
        return broke
    }

    private static func brokeAt(_ step: CapacityStep, base: CapacityStep, curve: [CapacityStep], unit: String) -> BrokeAt? {
        var losses: [String: Int] = [:]
        for row in step.why where row.outcome == "lost" && row.hop != "unknown" { losses[row.hop, default: 0] += row.count }
        if let (hop, lost) = losses.max(by: { $0.value < $1.value }), Double(lost) >= 0.001 * Double(max(step.expected, 1)) {
            let row = step.why.first { $0.hop == hop && $0.outcome == "lost" }
            let detail = row.map { " (\($0.phrase)\($0.status.map { " \($0)" } ?? "")\($0.reason.map { " \($0)" } ?? ""))" } ?? ""
            return BrokeAt(
                hop: hop, by: "losses", load: step.load,
                sentence: "at \(format(step.load)) \(unit) \(lost.grouped) of \(step.expected.grouped) pairs were lost at the \(hop.replacingOccurrences(of: "_", with: " "))\(detail)"
                    + flat(step, base, except: hop)
            )
        }
        // Refusals: the push service's (`pns:…`) before the backend's failed sends (`send:…`),
        // which a refusal further on may have caused.
        for (hop, prefix, verb) in [("push_service", "pns:", "refused"), ("backend", "send:", "failed")] {
            let refused = step.errors.filter { $0.key.hasPrefix(prefix) }
            let count = refused.values.reduce(0, +)
            guard count > 0, Double(count) >= 0.001 * Double(max(step.expected, 1)) else { continue }
            let classes = refused.sorted { $0.value > $1.value }.prefix(3).map { "\($0.key) ×\($0.value.grouped)" }.joined(separator: ", ")
            let latency = step.hops[hop].flatMap { after in base.hops[hop].map { " while its time went from \(ms($0.p99Ms)) to \(ms(after.p99Ms)) (p99)" } } ?? ""
            let noun = hop == "backend" ? "sends" : "pushes"
            return BrokeAt(
                hop: hop, by: "refusals", load: step.load,
                sentence: "at \(format(step.load)) \(unit) the \(hop.replacingOccurrences(of: "_", with: " ")) \(verb) \(count.grouped) \(noun) (\(classes))\(latency)"
                    + flat(step, base, except: hop)
            )
        }
        let grown = step.hops.compactMap { hop, latency -> (hop: String, before: Double, after: Double)? in
            guard let before = base.hops[hop]?.p99Ms, grew(before, latency.p99Ms) else { return nil }
            return (hop, before, latency.p99Ms)
        }
        guard let top = grown.max(by: { $0.after - $0.before < $1.after - $1.before }) else { return nil }
        let since = curve.first { candidate in candidate.load < step.load && candidate.hops[top.hop].map { grew(top.before, $0.p99Ms) } == true }
        let earlier = since.map { "; it had grown from \(format($0.load)) \(unit) on" } ?? ""
        return BrokeAt(
            hop: top.hop, by: "latency", load: step.load,
            sentence: "at \(format(step.load)) \(unit) \(hopNames[top.hop] ?? top.hop) went from \(ms(top.before)) to \(ms(top.after)) (p99)\(earlier)"
                + flat(step, base, except: top.hop)
        )
    }

    /// A p99 that at least doubled and grew by 5 ms.
    private static func grew(_ before: Double, _ after: Double) -> Bool { after > max(2 * before, before + 5) }

    /// "; the push service and devices stayed flat", for the hops within twice their base p99.
    private static func flat(_ step: CapacityStep, _ base: CapacityStep, except hop: String) -> String {
        let names = step.hops.keys.sorted().filter { name in
            guard name != hop, let before = base.hops[name]?.p99Ms, let after = step.hops[name]?.p99Ms else { return false }
            return !grew(before, after)
        }
        return names.isEmpty ? "" : "; " + names.map { $0.replacingOccurrences(of: "_", with: " ") }.joined(separator: ", ") + " stayed flat"
    }

    private func sentence(_ outcome: CapacitySearch.Outcome?) -> String {
        let u = unit
        func f(_ load: Double?) -> String { load.map { "\(Self.format($0)) \(u)" } ?? "?" }
        let broke = brokeAt.map { "; \($0.sentence)" } ?? ""
        let flags = nonMonotonic.isEmpty ? "" : "; runs disagreed at \(nonMonotonic.map { Self.format($0) }.joined(separator: ", ")) (non-monotonic)"
        switch outcome {
        case .found?:
            let repeats = spread.first.map { " in \($0.runs) run\($0.runs == 1 ? "" : "s")" } ?? ""
            let confirmed = capacity == lastPass ? "confirmed\(repeats)" : "the bracket's low side failed a repeat, so the highest load that always passed is named"
            return "capacity \(f(capacity)) (bracket \(f(lastPass)) – \(f(firstFail)), \(confirmed))\(broke)\(flags)"
        case .notReached?:
            return "the target met the SLO at every step up to \(f(lastPass)), the ladder's max: its capacity is at least that; raise capacity.max"
        case .belowStart?:
            return "the target failed the SLO at the first step, \(f(firstFail)): its capacity is below capacity.start\(broke)"
        case .generatorBound?:
            // Every limit of the step: the fleet's senders and pushfleet's push service may both be.
            let limits = steps.first { $0.verdict == "invalid" }?.generatorLimits ?? []
            let reason = limits.isEmpty ? "" : " (\(limits.joined(separator: "; ")))"
            let below = lastPass.map { "; the target met the SLO up to \(f($0))" } ?? ""
            return "generator-bound at \(f(generatorBoundAt)): pushfleet could not offer that load\(reason)\(below); \(RunResult.Generator.advice)"
        case .stopped?:
            let step = steps.last { $0.verdict == "stop" }
            return "stopped at \(f(step?.load)): \(step?.breaches.first ?? "a misdelivery or leak") — wrong at any load"
        case .outOfSteps?:
            return "the search used its \(Scenario.Capacity.maximumSteps) steps; bracket \(f(lastPass)) – \(f(firstFail))"
        case nil:
            return "aborted; bracket so far \(f(lastPass)) – \(f(firstFail))"
        }
    }

    public static func format(_ load: Double) -> String {
        load == load.rounded() ? Int(load).grouped : String(format: "%.2f", load)
    }

    static func ms(_ value: Double) -> String { value < 10 ? String(format: "%.1f ms", value) : String(format: "%.0f ms", value) }
}
