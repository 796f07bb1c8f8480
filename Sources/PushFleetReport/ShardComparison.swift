import Foundation
import PushFleetCore
import PushFleetLedger
public import PushFleetResults

/// A run played as one process beside the same scenario and seed played as shards and merged:
/// the ledger's counts and the operations' counts must be identical (the shards' plan is the
/// single run's, cut in slices); percentiles are shown, as they differ by run-to-run noise.
public struct ShardComparison: Sendable {
    public let single: RunResult
    public let sharded: RunResult
    public let shards: Int

    public init(single: RunResult, sharded: RunResult, shards: Int) {
        self.single = single
        self.sharded = sharded
        self.shards = shards
    }

    /// The counts that must agree, by name.
    var exact: [(String, Int, Int)] {
        let a = single.delivery
        let b = sharded.delivery
        var rows: [(String, Int, Int)] = [
            ("devices ready", single.devices.ready, sharded.devices.ready),
            ("sends", Int(single.counters["sends"] ?? 0), Int(sharded.counters["sends"] ?? 0)),
            ("delivery expected", a.expected, b.expected),
            ("delivery delivered", a.delivered, b.delivered),
            ("delivery lost", a.lost, b.lost),
            ("delivery misdelivered", a.misdelivered, b.misdelivered),
            ("delivery duplicates", a.duplicates, b.duplicates),
            ("leaks", a.leaks, b.leaks),
        ]
        let names = Set(single.operations.map(\.name) + sharded.operations.map(\.name)).sorted()
        for name in names where !name.hasPrefix("hop.") && name != MetricName.delivery && name != MetricName.endToEnd {
            let count = { (result: RunResult) in result.operations.first { $0.name == name }?.count ?? 0 }
            rows.append(("\(name) count", count(single), count(sharded)))
        }
        return rows
    }

    /// Shown beside, not judged.
    var shown: [(String, Int, Int)] {
        let a = single.delivery
        let b = sharded.delivery
        return [("delivery late", a.late, b.late), ("indeterminate", a.indeterminate, b.indeterminate), ("unverified", a.unverified, b.unverified)]
    }

    /// Registration renewals follow a dropped gateway connection (its devices register again
    /// when it is back), which is the machine's doing, not the plan's: a `register.put` count
    /// that differs is not a disagreement when either run recorded such a drop.
    var reconnected: Bool {
        (single.errors + sharded.errors).contains { $0.errorClass.hasPrefix("gateway:") || $0.errorClass.hasPrefix("connect:") }
    }

    func explained(_ row: (String, Int, Int)) -> Bool {
        row.0 == "\(MetricName.registerPut) count" && reconnected
    }

    public var differences: [String] {
        exact.filter { $0.1 != $0.2 && !explained($0) }.map { "\($0.0) \($0.1) vs \($0.2)" }
    }

    public var agree: Bool { differences.isEmpty }

    public var table: String {
        func pad(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }
        var lines = [pad("", 30) + pad("1 process", 16) + pad("\(shards) shards, merged", 22)]
        for (name, a, b) in exact + shown {
            let note = a == b ? "" : explained((name, a, b)) ? "renewals after a dropped gateway connection" : "differs"
            lines.append(pad(name, 30) + pad("\(a)", 16) + pad("\(b)", 22) + note)
        }
        for metric in [MetricName.send, MetricName.delivery, MetricName.endToEnd] {
            for p in [50.0, 99.0] {
                let value = { (result: RunResult) -> String in
                    guard let histogram = result.histograms[metric], histogram.count > 0 else { return "–" }
                    return String(format: "%.2f ms", Double(histogram.percentile(p)) / 1e6)
                }
                lines.append(pad("\(metric) p\(Int(p))", 30) + pad(value(single), 16) + pad(value(sharded), 22))
            }
        }
        lines.append(agree ? "ledger and operation counts agree" : "DIFFER: " + differences.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }
}
