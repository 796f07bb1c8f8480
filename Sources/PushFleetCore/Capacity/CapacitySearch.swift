/// The search of `pushfleet capacity` as a state machine: it says which load to run next and
/// takes each step's verdict, so its logic is tested without running anything.
///
/// A geometric ladder from `start` (×`factor`, capped at `maximum`) until a step fails; then
/// bisection (geometric means) between the last passing and the first failing load until they
/// are within `resolution`; then each of the two is run again until it has `repeats` runs. A
/// step the generator could not drive ends the search (generator-bound); a misdelivery or a
/// leak ends it at once.
public struct CapacitySearch: Sendable {
    public enum Phase: String, Sendable, Codable, Equatable {
        case ladder, bisect
        case repeated = "repeat"
    }

    public enum Verdict: String, Sendable, Codable, Equatable {
        /// The step met the SLO over its window.
        case pass
        /// The target breached the SLO over the window.
        case fail
        /// The generator was the limit: the step says nothing of the target.
        case invalid
        /// A misdelivery or a leak: wrong at any load, the search stops.
        case stop
    }

    /// What to do next.
    public enum Action: Sendable, Equatable {
        case run(load: Double, phase: Phase)
        case finished(Outcome)
    }

    public enum Outcome: String, Sendable, Codable, Equatable {
        /// Both sides of the bracket are known.
        case found
        /// Every step up to the ladder's maximum passed: the capacity is at least that.
        case notReached = "not_reached"
        /// The first step already failed: the capacity is below the ladder's start.
        case belowStart = "below_start"
        /// The generator was the limit before the target failed.
        case generatorBound = "generator_bound"
        /// A misdelivery or leak stopped the search.
        case stopped
        /// The search ran out of steps (``Scenario/Capacity/maximumSteps``).
        case outOfSteps = "out_of_steps"
    }

    public struct Record: Sendable, Equatable {
        public var load: Double
        public var phase: Phase
        public var verdict: Verdict
    }

    public let capacity: Scenario.Capacity
    /// Loads are whole numbers of devices when devices vary.
    private var integral: Bool { capacity.vary == .devices }
    public private(set) var records: [Record] = []
    private var pending: (load: Double, phase: Phase)?
    private var finishedWith: Outcome?

    public init(_ capacity: Scenario.Capacity) {
        self.capacity = capacity
    }

    /// The highest load that passed, and the lowest that failed (above it).
    public var lastPass: Double? { records.filter { $0.verdict == .pass && $0.phase != .repeated }.map(\.load).max() }
    public var firstFail: Double? {
        let floor = lastPass ?? 0
        return records.filter { $0.verdict == .fail && $0.phase != .repeated && $0.load > floor }.map(\.load).min()
    }
    /// Where the generator was the limit, if it was.
    public var generatorBoundAt: Double? { records.first { $0.verdict == .invalid }?.load }

    /// The highest load every run of which passed, at or below the last pass: the capacity
    /// found (a bracket's low side that failed a repeat is not confirmed).
    public var confirmed: Double? {
        let loads = Set(records.map(\.load))
        return loads.filter { load in
            let runs = records.filter { $0.load == load }
            return runs.allSatisfy { $0.verdict == .pass } && load <= (lastPass ?? 0)
        }.max()
    }

    /// Loads whose runs disagreed, or a pass above a fail.
    public var nonMonotonic: [Double] {
        let loads = Set(records.map(\.load)).sorted()
        var flagged = Set<Double>()
        for load in loads {
            let verdicts = Set(records.filter { $0.load == load }.map(\.verdict)).subtracting([.invalid])
            if verdicts.count > 1 { flagged.insert(load) }
        }
        let passes = records.filter { $0.verdict == .pass }.map(\.load)
        let fails = records.filter { $0.verdict == .fail }.map(\.load)
        for pass in passes where fails.contains(where: { $0 < pass }) { flagged.insert(pass) }
        return flagged.sorted()
    }

    /// The next step, or the end of the search.
    public mutating func next() -> Action {
        if let finishedWith { return .finished(finishedWith) }
        if let pending { return .run(load: pending.load, phase: pending.phase) }
        let action = decide()
        switch action {
        case .run(let load, let phase): pending = (load, phase)
        case .finished(let outcome): finishedWith = outcome
        }
        return action
    }

    /// The verdict of the step ``next()`` asked for.
    public mutating func record(_ verdict: Verdict) {
        guard let step = pending else { return }
        pending = nil
        records.append(Record(load: step.load, phase: step.phase, verdict: verdict))
    }

    private func decide() -> Action {
        if records.contains(where: { $0.verdict == .stop }) { return .finished(.stopped) }
        if records.contains(where: { $0.verdict == .invalid }) { return .finished(.generatorBound) }
        let action = plan()
        if case .run = action, records.count >= Scenario.Capacity.maximumSteps { return .finished(.outOfSteps) }
        return action
    }

    private func plan() -> Action {
        guard let last = records.last else { return .run(load: round(capacity.start), phase: .ladder) }
        let fail = firstFail
        guard let pass = lastPass else {
            // Nothing passed yet: the first step failed.
            return .finished(.belowStart)
        }
        guard let fail else {
            // Still climbing.
            if last.load >= capacity.maximum { return .finished(.notReached) }
            // Whole devices climb by one at least, or a small start with a small factor stalls.
            let next = integral ? max(round(last.load * capacity.factor), last.load + 1) : round(last.load * capacity.factor)
            return .run(load: min(next, capacity.maximum), phase: .ladder)
        }
        if fail / pass > 1 + capacity.resolution {
            let middle = round((pass * fail).squareRoot())
            if middle > pass && middle < fail { return .run(load: middle, phase: .bisect) }
        }
        // Repeats of the bracket, the low side first.
        for load in [pass, fail] where records.filter({ $0.load == load }).count < capacity.repeats {
            return .run(load: load, phase: .repeated)
        }
        return .finished(.found)
    }

    private func round(_ load: Double) -> Double {
        integral ? load.rounded() : (load * 100).rounded() / 100
    }
}
