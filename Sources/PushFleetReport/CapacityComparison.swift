import Foundation
public import PushFleetResults

/// Two capacity searches compared for a release gate: the capacity found (R*) and its bracket.
/// A current capacity below the baseline's by more than the tolerance is a regression; a
/// current search that the generator bounded before the target decides nothing.
public struct CapacityComparison: Sendable {
    public let baseline: CapacityResult
    public let current: CapacityResult
    public let tolerance: Double

    public init(baseline: CapacityResult, current: CapacityResult, tolerance: Double) {
        self.baseline = baseline
        self.current = current
        self.tolerance = tolerance
    }

    /// `passed`, `regressed`, or `inconclusive` (a search bounded by its generator, or one with no
    /// capacity to compare).
    public var verdict: String {
        // Wrong at any load, or failing where the baseline began: a regression whatever the numbers.
        if current.outcome == "stopped" || current.outcome == "below_start" { return "regressed" }
        let undecided: Set<String> = ["generator_bound", "aborted", "out_of_steps"]
        guard !undecided.contains(current.outcome), !undecided.contains(baseline.outcome), baseline.unit == current.unit,
            let now = current.capacity ?? lowerBound(current), let before = baseline.capacity ?? lowerBound(baseline)
        else { return "inconclusive" }
        return now < before * (1 - tolerance) ? "regressed" : "passed"
    }

    /// A search that never failed has its ladder's top as a lower bound.
    private func lowerBound(_ result: CapacityResult) -> Double? {
        result.outcome == "not_reached" ? result.lastPass : nil
    }

    public func text(baselineName: String, currentName: String) -> String {
        func describe(_ r: CapacityResult) -> String {
            let capacity = r.capacity.map { "\(CapacityResult.format($0)) \(r.unit)" } ?? "none"
            let bracket = "[\(r.lastPass.map(CapacityResult.format) ?? "–"), \(r.firstFail.map(CapacityResult.format) ?? "–")]"
            return "capacity \(capacity), bracket \(bracket), \(r.outcome)" + (r.brokeAt.map { ", broke at the \($0.hop)" } ?? "")
        }
        var lines = ["baseline \(baselineName): \(describe(baseline))", "current  \(currentName): \(describe(current))"]
        if let now = current.capacity, let before = baseline.capacity, before > 0 {
            lines.append(String(format: "change: %+.1f%% (tolerance −%.0f%%)", (now - before) / before * 100, tolerance * 100))
        }
        if baseline.unit != current.unit { lines.append("note: the searches vary different things (\(baseline.unit), \(current.unit))") }
        lines.append("verdict: \(verdict)")
        return lines.joined(separator: "\n")
    }
}
