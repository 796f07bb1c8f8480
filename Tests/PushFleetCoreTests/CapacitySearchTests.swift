import PushFleetCore
import Testing

/// The capacity search as a state machine, driven against simulated targets whose capacity is
/// known: a step passes exactly when its load is at most the capacity.
@Suite("Capacity search")
struct CapacitySearchTests {
    typealias Search = CapacitySearch

    static func capacity(
        vary: Scenario.Capacity.Vary = .rate, start: Double, maximum: Double, factor: Double = 2, resolution: Double = 0.05, repeats: Int = 3
    ) -> Scenario.Capacity {
        var capacity = Scenario.Capacity(vary: vary, start: start, maximum: maximum)
        capacity.factor = factor
        capacity.resolution = resolution
        capacity.repeats = repeats
        return capacity
    }

    /// Plays the search to its end, each step's verdict given by `verdict` (the load and the
    /// verdicts already recorded at that load); nil when it does not end within 200 steps.
    static func play(
        _ capacity: Scenario.Capacity, verdict: (Double, [Search.Record]) -> Search.Verdict
    ) -> (search: Search, outcome: Search.Outcome?) {
        var search = Search(capacity)
        for _ in 0..<200 {
            switch search.next() {
            case .finished(let outcome):
                return (search, outcome)
            case .run(let load, _):
                search.record(verdict(load, search.records.filter { $0.load == load }))
            }
        }
        return (search, nil)
    }

    /// A target of capacity `c`: a step passes iff its load is at most `c`.
    static func target(_ c: Double) -> (Double, [Search.Record]) -> Search.Verdict {
        { load, _ in load <= c ? .pass : .fail }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var capacity: Scenario.Capacity
        var c: Double
        var testDescription: String {
            "\(capacity.vary) start \(capacity.start) ×\(capacity.factor) max \(capacity.maximum) res \(capacity.resolution) repeats \(capacity.repeats); C = \(c)"
        }
    }

    static let cases: [Case] = [
        Case(capacity: capacity(start: 50, maximum: 1600, resolution: 0.05, repeats: 2), c: 400),
        Case(capacity: capacity(start: 50, maximum: 1600, resolution: 0.05, repeats: 2), c: 73),
        Case(capacity: capacity(start: 50, maximum: 1600, resolution: 0.05, repeats: 2), c: 1234.5),
        Case(capacity: capacity(start: 10, maximum: 100_000, factor: 3, resolution: 0.01, repeats: 3), c: 777),
        Case(capacity: capacity(start: 1, maximum: 1000, factor: 10, resolution: 0.5, repeats: 1), c: 5.5),
        Case(capacity: capacity(start: 0.5, maximum: 64, factor: 1.5, resolution: 0.2, repeats: 2), c: 3.3),
        Case(capacity: capacity(vary: .devices, start: 10, maximum: 5000, resolution: 0.05, repeats: 3), c: 137),
        Case(capacity: capacity(vary: .devices, start: 100, maximum: 10_000, factor: 4, resolution: 0.02, repeats: 2), c: 4321),
        Case(capacity: capacity(vary: .devices, start: 3, maximum: 500, factor: 2.5, resolution: 0.1, repeats: 3), c: 61),
    ]

    @Test("against a target of known capacity the search brackets it within the resolution", arguments: cases)
    func findsKnownCapacity(_ item: Case) throws {
        let (search, outcome) = Self.play(item.capacity, verdict: Self.target(item.c))
        #expect(outcome == .found)
        let pass = try #require(search.lastPass)
        let fail = try #require(search.firstFail)
        #expect(pass <= item.c && item.c < fail, "bracket \(pass) – \(fail)")
        if item.capacity.vary == .devices {
            // Whole devices: the bracket closes to the resolution, or to adjacent numbers.
            #expect(fail / pass <= 1 + item.capacity.resolution || fail - pass <= 1, "bracket \(pass) – \(fail)")
            #expect(search.records.allSatisfy { $0.load == $0.load.rounded() }, "\(search.records.map(\.load))")
        } else {
            #expect(fail / pass <= 1 + item.capacity.resolution, "bracket \(pass) – \(fail)")
        }
        #expect(search.confirmed == pass)
        #expect(search.nonMonotonic.isEmpty)
        #expect(search.generatorBoundAt == nil)
        #expect(search.records.filter { $0.load == pass }.count == item.capacity.repeats)
        #expect(search.records.filter { $0.load == fail }.count == item.capacity.repeats)
        #expect(search.records.count <= Scenario.Capacity.maximumSteps)
        // The ladder: start, then ×factor, until the first failure.
        let ladder = search.records.filter { $0.phase == .ladder }.map(\.load)
        #expect(ladder.first == item.capacity.start)
        for (low, high) in zip(ladder, ladder.dropFirst()) {
            #expect(abs(high - min(low * item.capacity.factor, item.capacity.maximum)) <= (item.capacity.vary == .devices ? 0.5 : 0.006))
        }
        #expect(search.records.filter { $0.phase == .ladder && $0.verdict == .fail }.count == 1)
        // Bisection only between the bracket's ends, and repeats only of them.
        let repeated = Set(search.records.filter { $0.phase == .repeated }.map(\.load))
        #expect(repeated.isSubset(of: [pass, fail]))
        #expect(search.records.suffix(2 * item.capacity.repeats - 2).allSatisfy { $0.phase == .repeated })
        // Once finished, the search stays finished.
        var ended = search
        #expect(ended.next() == .finished(.found))
    }

    @Test("next() asks for the same step until its verdict is recorded; a verdict with nothing asked is ignored")
    func pendingStep() {
        var search = Search(Self.capacity(start: 50, maximum: 800))
        search.record(.fail)
        #expect(search.records.isEmpty)
        #expect(search.next() == .run(load: 50, phase: .ladder))
        #expect(search.next() == .run(load: 50, phase: .ladder))
        search.record(.pass)
        #expect(search.next() == .run(load: 100, phase: .ladder))
        #expect(search.records.count == 1)
        #expect(search.records.first.map { [$0.load] } == [50])
        #expect(search.records.first?.phase == .ladder && search.records.first?.verdict == .pass)
    }

    @Test("every step passing ends not_reached at the ladder's maximum, which caps the last step")
    func notReached() throws {
        let capacity = Self.capacity(start: 50, maximum: 1000, factor: 3)
        let (search, outcome) = Self.play(capacity, verdict: Self.target(.infinity))
        #expect(outcome == .notReached)
        #expect(search.records.map(\.load) == [50, 150, 450, 1000])
        #expect(search.records.allSatisfy { $0.phase == .ladder && $0.verdict == .pass })
        #expect(search.lastPass == 1000)
        #expect(search.firstFail == nil)
        #expect(search.confirmed == 1000)
    }

    @Test("a first step that fails ends below_start at once")
    func belowStart() {
        let (search, outcome) = Self.play(Self.capacity(start: 50, maximum: 1000), verdict: Self.target(10))
        #expect(outcome == .belowStart)
        #expect(search.records.count == 1)
        #expect(search.lastPass == nil)
        #expect(search.firstFail == 50)
        #expect(search.confirmed == nil)
    }

    @Test("an invalid step (the generator was the limit) ends generator_bound where it happened")
    func generatorBound() {
        let (search, outcome) = Self.play(Self.capacity(start: 50, maximum: 1600)) { load, _ in load >= 200 ? .invalid : .pass }
        #expect(outcome == .generatorBound)
        #expect(search.records.map(\.load) == [50, 100, 200])
        #expect(search.generatorBoundAt == 200)
        #expect(search.lastPass == 100)
        #expect(search.firstFail == nil)
        // The same during bisection: the bracket so far stays.
        let (bisecting, end) = Self.play(Self.capacity(start: 50, maximum: 1600)) { load, _ in
            load <= 400 ? .pass : (500..<700).contains(load) ? .invalid : .fail
        }
        #expect(end == .generatorBound)
        #expect(bisecting.records.map(\.load) == [50, 100, 200, 400, 800, 565.69])
        #expect(bisecting.records.last?.phase == .bisect)
        #expect(bisecting.generatorBoundAt == 565.69)
        #expect(bisecting.lastPass == 400 && bisecting.firstFail == 800)
    }

    @Test("a misdelivery or leak (stop) ends the search at once, whatever else it would do")
    func stopped() {
        let (search, outcome) = Self.play(Self.capacity(start: 50, maximum: 1600)) { load, _ in load == 100 ? .stop : .pass }
        #expect(outcome == .stopped)
        #expect(search.records.map(\.verdict) == [.pass, .stop])
        #expect(search.lastPass == 50)
    }

    @Test("a repeat of the bracket's low side that fails is not confirmed and is flagged non-monotonic")
    func lowSideFailsARepeat() throws {
        let capacity = Self.capacity(start: 50, maximum: 1600, resolution: 0.05, repeats: 3)
        let (search, outcome) = Self.play(capacity) { load, before in
            // C = 400, but the second run at the bracket's low side fails.
            if load <= 400, before.count == 1, before[0].verdict == .pass, load > 380 { return .fail }
            return load <= 400 ? .pass : .fail
        }
        #expect(outcome == .found)
        let pass = try #require(search.lastPass)
        #expect(pass > 380 && pass <= 400)
        let runs = search.records.filter { $0.load == pass }
        #expect(runs.count == 3)
        #expect(runs.map(\.verdict) == [.pass, .fail, .pass])
        let confirmed = try #require(search.confirmed)
        #expect(confirmed < pass)
        // The highest load below it that always passed.
        let below = Set(search.records.filter { $0.load < pass }.map(\.load)).filter { load in
            search.records.filter { $0.load == load }.allSatisfy { $0.verdict == .pass }
        }
        #expect(confirmed == below.max())
        #expect(search.nonMonotonic.contains(pass))
        #expect(search.nonMonotonic == [pass])
    }

    @Test("runs that disagree, and a pass above a fail, are non-monotonic")
    func disagreeingRepeats() {
        var search = Search(Self.capacity(start: 100, maximum: 1600, resolution: 0.2, repeats: 2))
        let expected: [(Double, Search.Phase, Search.Verdict)] = [
            (100, .ladder, .pass), (200, .ladder, .fail), (141.42, .bisect, .fail), (118.92, .bisect, .pass),
            // 141.42 / 118.92 is within 20%: the bracket's repeats, low side first.
            (118.92, .repeated, .fail), (141.42, .repeated, .pass),
        ]
        for (load, phase, verdict) in expected {
            #expect(search.next() == .run(load: load, phase: phase))
            search.record(verdict)
        }
        #expect(search.next() == .finished(.found))
        // Repeats do not move the bracket.
        #expect(search.lastPass == 118.92 && search.firstFail == 141.42)
        #expect(search.confirmed == 100)
        #expect(search.nonMonotonic == [118.92, 141.42])
    }

    @Test("the search never makes more than its maximum of steps")
    func outOfSteps() {
        // More repeats than the range allows (the loader refuses them) to reach the cap.
        let capacity = Self.capacity(start: 50, maximum: 1600, resolution: 0.05, repeats: 100)
        let (search, outcome) = Self.play(capacity, verdict: Self.target(400))
        #expect(outcome == .outOfSteps)
        #expect(search.records.count == Scenario.Capacity.maximumSteps)
    }
}
