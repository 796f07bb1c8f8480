public import PushFleetCore
public import PushFleetEngine
import PushFleetLedger
public import PushFleetResults
import Foundation
import Logging

/// Runs a capacity search: each step is a run of its own (a fresh fleet, and a fresh embedded
/// system when the target is embedded) at one load, judged over its window after the warm-up;
/// ``CapacitySearch`` picks the loads.
public struct CapacityRunner: Sendable {
    public let scenario: Scenario
    public var options: FleetRunner.Options
    /// Receives each step's result and the folder name it should be written under, so that no
    /// step's reports are lost when the search is interrupted.
    public var writeStep: (@Sendable (RunResult, String) throws -> Void)?
    /// Receives a line at each step's end.
    public var stepDone: (@Sendable (String) -> Void)?
    /// Told as each step starts (its index, phase and load), for the live page.
    public var stepStarted: (@Sendable (_ index: Int, _ phase: String, _ load: Double) -> Void)?
    /// Told as each step is judged, with the bracket after it, for the live page.
    public var stepRecorded: (@Sendable (CapacityStep, _ lastPass: Double?, _ firstFail: Double?) -> Void)?

    public init(scenario: Scenario, options: FleetRunner.Options) {
        self.scenario = scenario
        self.options = options
    }

    public func run(required: Double?, stop: StopControl) async throws -> CapacityResult {
        guard let capacity = scenario.capacity else { throw MissingCapacityError() }
        let unit = capacity.vary == .rate ? "sends/s" : "devices"
        var search = CapacitySearch(capacity)
        var steps: [CapacityStep] = []
        let startedWall = WallClock.nanoseconds()
        var outcome: CapacitySearch.Outcome?
        var failure: String?
        loop: while true {
            switch search.next() {
            case .finished(let end):
                outcome = end
                break loop
            case .run(let load, let phase):
                guard stop.level == .running else { break loop }
                let index = steps.count + 1
                let label = "step \(index) (\(phase.rawValue)) \(CapacityResult.format(load)) \(unit)"
                let bracket = Self.bracket(search, unit: unit)
                var stepOptions = options
                stepOptions.judgedWindow = capacity.warmup..<(capacity.warmup + capacity.window)
                // An embedded target starts afresh each step; an external backend keeps what it is given.
                if case .external = scenario.target { stepOptions.departAtEnd = true }
                if let progress = options.progress {
                    stepOptions.progress = { @Sendable line in progress("\(label) · \(bracket) · \(line)") }
                }
                stepStarted?(index, phase.rawValue, load)
                let stepScenario = scenario.capacityStep(load)
                let plan = FleetPlan(scenario: stepScenario, runID: FleetRunner.makeRunID())
                let result: RunResult
                do {
                    result = try await FleetRunner(scenario: stepScenario, plan: plan, options: stepOptions).run(stop: stop)
                } catch {
                    // What was found so far is still reported.
                    failure = "\(label) could not run: \(error)"
                    break loop
                }
                let folder = String(format: "steps/%02d-%@", index, CapacityResult.format(load).replacingOccurrences(of: ",", with: ""))
                do { try writeStep?(result, folder) } catch {
                    failure = "\(label): its reports could not be written: \(error)"
                    break loop
                }
                if result.info.aborted { break loop }
                let verdict = Self.verdict(result)
                search.record(verdict)
                let step = CapacityStep.from(result, index: index, phase: phase, load: load, verdict: verdict, report: folder)
                steps.append(step)
                stepRecorded?(step, search.lastPass, search.firstFail)
                let why = (verdict == .invalid ? step.generatorLimits : step.breaches).first.map { " — \($0)" } ?? ""
                stepDone?("\(label): \(verdict.rawValue.uppercased())\(why) · \(Self.bracket(search, unit: unit))")
            }
        }
        let provenance = options.provenance
        var result = CapacityResult(
            version: provenance.version, scenario: scenario.name, scenarioFile: provenance.scenarioFile, target: FleetRunner.describe(scenario.target),
            host: provenance.host.name, cores: provenance.host.cores, startedAt: FleetRunner.iso(startedWall), endedAt: FleetRunner.iso(WallClock.nanoseconds()),
            vary: capacity.vary.rawValue, unit: unit, slo: scenario.effectiveThresholds.map { "\($0.metric): \($0.expression)" },
            warmupSeconds: capacity.warmup.seconds, windowSeconds: capacity.window.seconds, outcome: outcome?.rawValue ?? "aborted", steps: steps
        )
        result.required = required ?? capacity.require
        result.analyse(search, outcome: outcome)
        if let failure {
            result.failure = failure
            result.summary = failure + "; " + result.summary
        } else if outcome == nil {
            result.failure = stop.reason.map { "stopped: \($0)" }
        }
        return result
    }

    /// A step's verdict: wrong at any load (stop), the generator's limit (invalid), a breach
    /// sustained over the window (fail), or a pass.
    static func verdict(_ result: RunResult) -> CapacitySearch.Verdict {
        let counts = result.window?.delivery ?? result.delivery
        if counts.misdelivered > 0 || counts.leaks > 0 || result.delivery.misdelivered > 0 || result.delivery.leaks > 0 { return .stop }
        if result.generator?.bound == true { return .invalid }
        guard let window = result.window else { return .fail }
        return window.met ? .pass : .fail
    }

    static func bracket(_ search: CapacitySearch, unit: String) -> String {
        "bracket [\(search.lastPass.map(CapacityResult.format) ?? "–"), \(search.firstFail.map(CapacityResult.format) ?? "–")] \(unit)"
    }
}

/// `pushfleet capacity` on a scenario without a `capacity:` section.
public struct MissingCapacityError: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "the scenario has no capacity: section (docs/capacity.md)" }
}
