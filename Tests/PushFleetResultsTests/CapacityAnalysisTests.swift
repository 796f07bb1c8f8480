import Foundation
import PushFleetCore
import PushFleetResults
import Testing

/// `CapacityResult.analyse` on synthetic steps: the capacity, the bracket, the requirement and
/// the hop that broke at the first failing load. (Pure: it lives here because PushFleetCoreTests
/// does not depend on PushFleetResults.)
@Suite("Capacity analysis")
struct CapacityAnalysisTests {
    /// A target of capacity 400 sends/s, searched from 50/s with one run per step.
    static func search(c: Double = 400, repeats: Int = 1) -> CapacitySearch {
        var capacity = Scenario.Capacity(vary: .rate, start: 50, maximum: 1600)
        capacity.resolution = 0.05
        capacity.repeats = repeats
        var search = CapacitySearch(capacity)
        while case .run(let load, _) = search.next() { search.record(load <= c ? .pass : .fail) }
        return search
    }

    /// A step per record of `search`, its hops' p99s and its `why` rows given per load.
    static func steps(
        _ search: CapacitySearch, hops: (Double, Bool) -> [String: CapacityStep.HopLatency], why: (Double, Bool) -> [RunResult.Why] = { _, _ in [] },
        expected: Int = 1000
    ) -> [CapacityStep] {
        search.records.enumerated().map { index, record in
            let pass = record.verdict == .pass
            return CapacityStep(
                index: index + 1, phase: record.phase.rawValue, load: record.load, verdict: record.verdict.rawValue,
                breaches: pass ? [] : ["delivery.latency: p(99) < 250ms"], generatorLimits: [], offeredRate: record.load,
                throughput: min(record.load, 400), devices: 200, deliveryP50Ms: pass ? 4 : 90, deliveryP99Ms: pass ? 12 : 300, sendP99Ms: 3,
                lostRatio: 0, lateRatio: 0, expected: expected, lost: 0, backlog: [0, 0, 0, 0], hops: hops(record.load, pass), why: why(record.load, pass),
                errors: [:], fleetCPUCores: 0.5, durationSeconds: 12, report: String(format: "steps/%02d", index + 1)
            )
        }
    }

    static func result(_ steps: [CapacityStep], required: Double? = nil) -> CapacityResult {
        var result = CapacityResult(
            version: "test", scenario: "cap", scenarioFile: "cap.yaml", target: "embedded", host: "test", cores: 2, startedAt: "", endedAt: "",
            vary: "rate", unit: "sends/s", slo: ["delivery.latency: p(99) < 250ms"], warmupSeconds: 2, windowSeconds: 8, outcome: "found",
            steps: steps
        )
        result.required = required
        return result
    }

    static func lost(_ hop: String, _ count: Int, status: Int? = nil) -> RunResult.Why {
        RunResult.Why(
            outcome: "lost", hop: hop, cause: "refused", platform: "apns", status: status, reason: nil, byToken: nil, count: count,
            phrase: "refused", advice: nil
        )
    }

    /// Flat hops, but for the push service's p99, which jumps from 2 ms to 120 ms at every failing load.
    static func pushServiceJumps(_ load: Double, _ pass: Bool) -> [String: CapacityStep.HopLatency] {
        [
            "backend": .init(p50Ms: 2, p99Ms: 5),
            "push_service": .init(p50Ms: 1, p99Ms: pass ? 2 : 120),
            "device": .init(p50Ms: 0.5, p99Ms: 1),
        ]
    }

    @Test("a push-service p99 that jumps at the first failing load is where it broke, by latency")
    func brokeByLatency() throws {
        let search = Self.search()
        let firstFail = try #require(search.firstFail)
        #expect(search.lastPass == 400)
        var result = Self.result(Self.steps(search, hops: Self.pushServiceJumps))
        result.analyse(search, outcome: .found)
        #expect(result.capacity == 400)
        #expect(result.lastPass == 400 && result.firstFail == firstFail)
        #expect(result.nonMonotonic.isEmpty)
        let broke = try #require(result.brokeAt)
        #expect(broke.hop == "push_service")
        #expect(broke.by == "latency")
        #expect(broke.load == firstFail)
        #expect(broke.sentence.contains("the push service's time went from 2.0 ms to 120 ms (p99)"), "\(broke.sentence)")
        #expect(broke.sentence.contains("backend, device stayed flat"), "\(broke.sentence)")
        // It grew only at failing loads: no earlier load is named.
        #expect(!broke.sentence.contains("had grown from"), "\(broke.sentence)")
        #expect(result.summary.hasPrefix("capacity 400 sends/s (bracket 400 sends/s – \(CapacityResult.format(firstFail)) sends/s, confirmed in 1 run)"), "\(result.summary)")
        #expect(result.summary.contains(broke.sentence))
        #expect(result.meetsRequirement == nil)
        #expect(result.spread.map(\.load) == [400, firstFail])
        #expect(result.spread.map(\.runs) == [1, 1])
    }

    @Test("a p99 that had grown below the first failing load names where it started")
    func grownEarlier() throws {
        let search = Self.search()
        var result = Self.result(Self.steps(search, hops: { load, pass in
            var hops = Self.pushServiceJumps(load, pass)
            if load >= 200 && pass { hops["push_service"] = .init(p50Ms: 1, p99Ms: 30) }
            return hops
        }))
        result.analyse(search, outcome: .found)
        let broke = try #require(result.brokeAt)
        #expect(broke.hop == "push_service" && broke.by == "latency")
        #expect(broke.sentence.contains("it had grown from 200 sends/s on"), "\(broke.sentence)")
    }

    @Test("where it broke names traces of pairs that went wrong at that hop at that load, and only those")
    func brokeWithTraces() throws {
        let search = Self.search()
        let firstFail = try #require(search.firstFail)
        let why: (Double, Bool) -> [RunResult.Why] = { load, _ in load == firstFail ? [Self.lost("backend", 3, status: 503)] : [] }
        var steps = Self.steps(search, hops: Self.pushServiceJumps, why: why)
        for index in steps.indices {
            steps[index].traces = ["backend": ["\(index)a", "\(index)b"], "push_service": ["\(index)p"]]
        }
        var result = Self.result(steps)
        result.analyse(search, outcome: .found)
        let broke = try #require(result.brokeAt)
        let candidates = steps.filter { $0.load == firstFail && $0.verdict == "fail" }.compactMap { $0.traces?["backend"] }
        let traces = try #require(broke.traces)
        #expect(broke.hop == "backend" && candidates.contains(traces), "\(traces) of \(candidates)")
        #expect(broke.sentence.hasSuffix("; traces of pairs that went wrong there: " + traces.joined(separator: ", ")), "\(broke.sentence)")

        var untraced = Self.result(Self.steps(search, hops: Self.pushServiceJumps, why: why))
        untraced.analyse(search, outcome: .found)
        #expect(untraced.brokeAt?.traces == nil && untraced.brokeAt?.sentence.contains("traces") == false)
    }

    @Test("losses of a thousandth of the pairs at a hop, at the first failing load, are where it broke")
    func brokeByLosses() throws {
        let search = Self.search()
        let firstFail = try #require(search.firstFail)
        // The push service's p99 jumps as well; losses come first.
        let why: (Double, Bool) -> [RunResult.Why] = { load, _ in
            load == firstFail ? [Self.lost("backend", 3, status: 503), Self.lost("push_service", 2), Self.lost("unknown", 40)] : []
        }
        var result = Self.result(Self.steps(search, hops: Self.pushServiceJumps, why: why))
        result.analyse(search, outcome: .found)
        let broke = try #require(result.brokeAt)
        #expect(broke.hop == "backend")
        #expect(broke.by == "losses")
        #expect(broke.load == firstFail)
        #expect(broke.sentence.contains("3 of 1,000 pairs were lost at the backend (refused 503)"), "\(broke.sentence)")
        #expect(result.summary.contains("were lost at the backend"), "\(result.summary)")

        // Below a thousandth (1 of 2,000), losses do not decide: the latency does.
        let few: (Double, Bool) -> [RunResult.Why] = { load, _ in load == firstFail ? [Self.lost("backend", 1)] : [] }
        var minor = Self.result(Self.steps(search, hops: Self.pushServiceJumps, why: few, expected: 2000))
        minor.analyse(search, outcome: .found)
        #expect(minor.brokeAt?.hop == "push_service")
        #expect(minor.brokeAt?.by == "latency")

        // Rows at loads other than the first failing one do not count.
        let elsewhere: (Double, Bool) -> [RunResult.Why] = { load, _ in load == 800 ? [Self.lost("backend", 500)] : [] }
        var later = Self.result(Self.steps(search, hops: Self.pushServiceJumps, why: elsewhere))
        later.analyse(search, outcome: .found)
        #expect(later.brokeAt?.hop == "push_service")
    }

    @Test("no hop grew and nothing was lost: no hop is named")
    func nothingBroke() {
        let search = Self.search()
        var result = Self.result(Self.steps(search, hops: { _, _ in ["backend": .init(p50Ms: 2, p99Ms: 5), "push_service": .init(p50Ms: 1, p99Ms: 6)] }))
        result.analyse(search, outcome: .found)
        #expect(result.brokeAt == nil)
        #expect(result.capacity == 400)
    }

    @Test("the requirement is met only at or below the capacity")
    func requirement() {
        let search = Self.search()
        for (required, met) in [(1000.0, false), (401, false), (400, true), (300, true)] {
            var result = Self.result(Self.steps(search, hops: Self.pushServiceJumps), required: required)
            result.analyse(search, outcome: .found)
            #expect(result.meetsRequirement == met, "required \(required)")
        }
    }

    @Test("a low side that failed a repeat: the capacity is the highest load that always passed, and the summary says so")
    func unconfirmedLowSide() throws {
        var capacity = Scenario.Capacity(vary: .rate, start: 50, maximum: 1600)
        capacity.repeats = 2
        var search = CapacitySearch(capacity)
        while case .run(let load, let phase) = search.next() {
            search.record(load == 400 && phase == .repeated ? .fail : load <= 400 ? .pass : .fail)
        }
        var result = Self.result(Self.steps(search, hops: Self.pushServiceJumps))
        result.analyse(search, outcome: .found)
        #expect(result.lastPass == 400)
        #expect(result.capacity == 200)
        #expect(result.nonMonotonic == [400])
        #expect(result.spread.first?.verdicts == ["pass", "fail"])
        #expect(result.summary.contains("capacity 200 sends/s"), "\(result.summary)")
        #expect(result.summary.contains("the bracket's low side failed a repeat"), "\(result.summary)")
        #expect(result.summary.contains("runs disagreed at 400 (non-monotonic)"), "\(result.summary)")
    }

    @Test("the other outcomes' summaries")
    func otherOutcomes() throws {
        let all = Self.search(c: .infinity)
        var reached = Self.result(Self.steps(all, hops: Self.pushServiceJumps))
        reached.analyse(all, outcome: .notReached)
        #expect(reached.capacity == 1600)
        #expect(reached.summary.contains("every step up to 1,600 sends/s, the ladder's max"), "\(reached.summary)")

        let none = Self.search(c: 10)
        var below = Self.result(Self.steps(none, hops: Self.pushServiceJumps), required: 20)
        below.analyse(none, outcome: .belowStart)
        #expect(below.capacity == nil)
        #expect(below.meetsRequirement == false)
        #expect(below.summary.contains("failed the SLO at the first step, 50 sends/s"), "\(below.summary)")
    }

    @Test("a generator-bound search's summary names every limit of its step: the fleet's senders and pushfleet's push service")
    func generatorBoundNamesEveryLimit() {
        var search = Self.search(c: 100)
        search = CapacitySearch(search.capacity)
        while case .run(let load, _) = search.next() { search.record(load <= 100 ? .pass : .invalid) }
        var steps = Self.steps(search, hops: Self.pushServiceJumps)
        for index in steps.indices where steps[index].verdict == "invalid" {
            steps[index].generatorLimits = ["late starts: 18% of sends started over 10 ms late", "push service starved: its loops waited for a core 90% of the time"]
        }
        var result = Self.result(steps)
        result.analyse(search, outcome: .generatorBound)
        #expect(result.summary.hasPrefix("generator-bound at 200 sends/s"), "\(result.summary)")
        #expect(result.summary.contains("the target met the SLO up to 100 sends/s"), "\(result.summary)")
        #expect(result.summary.contains("(late starts: 18% of sends started over 10 ms late; push service starved: its loops waited"), "\(result.summary)")
    }

    @Test("refusals at the first failing load name their hop: the push service's before the backend's failed sends")
    func brokeByRefusals() throws {
        let search = Self.search()
        let firstFail = try #require(search.firstFail)
        func with(_ errors: [String: Int]) -> [CapacityStep] {
            Self.steps(search, hops: { _, _ in ["backend": .init(p50Ms: 2, p99Ms: 5), "push_service": .init(p50Ms: 1, p99Ms: 2)] }).map { step in
                var step = step
                if step.verdict == "fail" { step.errors = errors }
                return step
            }
        }
        var pushService = Self.result(with(["pns:apns:429:TooManyRequests": 40, "send:status_500": 12]))
        pushService.analyse(search, outcome: .found)
        let refused = try #require(pushService.brokeAt)
        #expect(refused.hop == "push_service" && refused.by == "refusals" && refused.load == firstFail)
        #expect(refused.sentence.contains("the push service refused 40 pushes (pns:apns:429:TooManyRequests ×40)"), "\(refused.sentence)")

        var backend = Self.result(with(["send:status_503": 30]))
        backend.analyse(search, outcome: .found)
        #expect(backend.brokeAt?.hop == "backend" && backend.brokeAt?.by == "refusals")
        #expect(backend.brokeAt?.sentence.contains("the backend failed 30 sends (send:status_503 ×30)") == true, "\(backend.brokeAt?.sentence ?? "")")

        // Under a thousandth of the expected pairs (1,000 here) is noise, not where it broke.
        var noise = Self.result(with(["send:status_503": 0]))
        noise.analyse(search, outcome: .found)
        #expect(noise.brokeAt == nil)
    }

    @Test("a curve that does not bend has no knee: Kneedle finds one in any noise")
    func noKneeWhereFlat() throws {
        let all = Self.search(c: .infinity)
        let flat = Self.steps(all, hops: Self.pushServiceJumps).map { step in
            var step = step
            step.throughput = step.load * 0.999
            step.deliveryP99Ms = 12 + (step.load.truncatingRemainder(dividingBy: 7))
            return step
        }
        var result = Self.result(flat)
        result.analyse(all, outcome: .notReached)
        #expect(result.kneeOfThroughput == nil && result.kneeOfP99 == nil)

        // The same loads with a ceiling at 400 and a p99 that takes off there have both.
        let bent = Self.steps(all, hops: Self.pushServiceJumps).map { step in
            var step = step
            step.throughput = min(step.load, 400)
            step.deliveryP99Ms = step.load <= 400 ? 10 : 10 + step.load
            return step
        }
        var knees = Self.result(bent)
        knees.analyse(all, outcome: .notReached)
        #expect(knees.kneeOfThroughput != nil && knees.kneeOfP99 != nil)
    }
}

import PushFleetReport

/// What compare and the exit code make of searches that did not end with a plain capacity.
@Suite("Capacity verdicts")
struct CapacityVerdictTests {
    static func result(outcome: String, capacity: Double?, unit: String = "sends/s") -> CapacityResult {
        var result = CapacityAnalysisTests.result([])
        result.outcome = outcome
        result.capacity = capacity
        result.lastPass = capacity
        result.unit = unit
        return result
    }

    @Test("compare: a stopped search regresses whatever its capacity; aborted, out of steps or unlike searches decide nothing")
    func comparisons() {
        let baseline = Self.result(outcome: "found", capacity: 210)
        #expect(CapacityComparison(baseline: baseline, current: Self.result(outcome: "stopped", capacity: 400), tolerance: 0.1).verdict == "regressed")
        #expect(CapacityComparison(baseline: baseline, current: Self.result(outcome: "below_start", capacity: nil), tolerance: 0.1).verdict == "regressed")
        #expect(CapacityComparison(baseline: baseline, current: Self.result(outcome: "aborted", capacity: 100), tolerance: 0.1).verdict == "inconclusive")
        #expect(CapacityComparison(baseline: baseline, current: Self.result(outcome: "out_of_steps", capacity: 100), tolerance: 0.1).verdict == "inconclusive")
        #expect(CapacityComparison(baseline: baseline, current: Self.result(outcome: "found", capacity: 210, unit: "devices"), tolerance: 0.1).verdict == "inconclusive")
        #expect(CapacityComparison(baseline: baseline, current: Self.result(outcome: "generator_bound", capacity: 100), tolerance: 0.1).verdict == "inconclusive")
        #expect(CapacityComparison(baseline: baseline, current: Self.result(outcome: "found", capacity: 190), tolerance: 0.1).verdict == "passed")
        #expect(CapacityComparison(baseline: baseline, current: Self.result(outcome: "found", capacity: 180), tolerance: 0.1).verdict == "regressed")
        #expect(CapacityComparison(baseline: baseline, current: Self.result(outcome: "not_reached", capacity: 1600), tolerance: 0.1).verdict == "passed")
    }

    @Test("a found bracket whose low side failed a repeat, with nothing below that always passed, is unconfirmed")
    func unconfirmed() {
        #expect(CapacityReport.verdict(Self.result(outcome: "found", capacity: nil)) == "unconfirmed")
        #expect(CapacityReport.verdict(Self.result(outcome: "found", capacity: 300)) == "found")
    }

    @Test("a rule on what is wrong at any load breaches over the window alone; a latency rule needs half the slices")
    func exactRules() {
        let duplicates = RunResult.WindowThreshold(
            metric: "delivery.duplicates", expression: "count == 0", measured: 50, unit: "", passed: false, slices: 4, slicesFailed: 1
        )
        #expect(duplicates.sustained)
        let latency = RunResult.WindowThreshold(
            metric: "delivery", expression: "p(99) < 250ms", measured: 300, unit: "ms", passed: false, slices: 4, slicesFailed: 1
        )
        #expect(!latency.sustained)
        var held = latency
        held.slicesFailed = 2
        #expect(held.sustained)
    }
}
