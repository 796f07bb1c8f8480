import Foundation
import PushFleetLedger
public import PushFleetResults

/// The ledger of each network fault's window in words, for the terminal: what the pairs it
/// touched became, and which window a failing run should replay alone.
public enum NetworkFaultsText {
    public static func lines(_ r: RunResult) -> [String] {
        guard let windows = r.networkFaults, !windows.isEmpty else { return [] }
        var lines = ["network faults (sends that started in each window, to its devices):"]
        for w in windows {
            let c = w.delivery
            let counts = [
                ("expected", c.expected), ("delivered", c.delivered), ("late", c.late), ("replaced", c.replaced), ("lost", c.lost),
                ("duplicates", c.duplicates), ("recovered", c.recovered), ("indeterminate", c.indeterminate), ("misdelivered", c.misdelivered),
            ].filter { $0.1 > 0 || ["expected", "delivered", "lost", "duplicates"].contains($0.0) }
            let span = "\(format(w.startSecond))–\(format(w.endSecond)) s"
            lines.append("  #\(w.fault) \(w.label), \(span), \(w.devices) devices: " + counts.map { "\($0.0) \($0.1)" }.joined(separator: ", "))
            let hops = ["backend", "hub", "push_service", "device", "fetch"].compactMap { name in
                w.hopP50Ms[name].map { "\(name.replacingOccurrences(of: "_", with: " ")) \(format(ms: $0))/\(format(ms: w.hopP99Ms[name] ?? 0))" }
            }
            if !hops.isEmpty { lines.append("     hops (p50/p99 ms): " + hops.joined(separator: ", ")) }
        }
        if let shrink = shrinking(r) { lines.append(shrink) }
        return lines
    }

    /// The windows holding pairs that broke a promise, and the command that replays the first alone.
    public static func shrinking(_ r: RunResult) -> String? {
        let failing = (r.networkFaults ?? []).filter { $0.failing > 0 }
        guard let first = failing.first else { return nil }
        let named = failing.map { "#\($0.fault) (\($0.failing))" }.joined(separator: ", ")
        let file = r.info.scenarioFile.isEmpty ? "SCENARIO" : r.info.scenarioFile
        return "failing pairs fall in window \(named); replay one alone: pushfleet run \(file) --only-fault \(first.fault) --seed \(r.info.seed)"
    }

    static func format(ms: Double) -> String { String(format: "%.2f", ms) }

    static func format(_ seconds: Double) -> String {
        let tenths = (seconds * 10).rounded() / 10
        return tenths == tenths.rounded() ? String(Int(tenths)) : String(tenths)
    }
}
