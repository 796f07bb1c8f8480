import Foundation
import PushFleetCore
public import PushFleetResults

/// The "why lost" lines every report shares: per outcome, its pairs grouped by where and why they
/// went wrong, most first, with what to look at.
///
///     lost 639: refused by the push service 639 — apns 403 InvalidProviderToken 426, fcm 401 UNAUTHENTICATED 213: check the backend's push credentials
public enum WhyLost {
    /// One line per outcome that has pairs (lost, then unverified, then late).
    public static func lines(_ r: RunResult, groupsPerLine: Int = 4, detailsPerGroup: Int = 4) -> [String] {
        guard let hops = r.hops else { return [] }
        return ["lost", "unverified", "late"].compactMap { outcome in
            let rows = hops.why.filter { $0.outcome == outcome }
            guard !rows.isEmpty else { return nil }
            let total = rows.reduce(0) { $0 + $1.count }
            let groups = Dictionary(grouping: rows) { "\($0.hop)/\($0.cause)" }.values
                .map { ($0, $0.reduce(0) { $0 + $1.count }) }
                .sorted { ($1.1, $0.0[0].hop) < ($0.1, $1.0[0].hop) }
            var parts = groups.prefix(groupsPerLine).map { rows, count in
                let details = rows.sorted { $0.count > $1.count }.prefix(detailsPerGroup).map { "\($0.detail) \($0.count)" }
                let more = rows.count > detailsPerGroup ? ", …" : ""
                let advice = rows.max { $0.count < $1.count }?.advice.map { ": " + $0 } ?? ""
                return "\(phrase(rows[0])) \(count) — \(details.joined(separator: ", "))\(more)\(advice)"
            }
            if groups.count > groupsPerLine { parts.append("\(groups.count - groupsPerLine) more in report.html") }
            return "\(outcome) \(total): " + parts.joined(separator: "; ")
        }
    }

    /// The group's cause in words, naming the hop where the cause does not.
    static func phrase(_ row: RunResult.Why) -> String {
        switch row.cause {
        case "slow": "slow at the \(hopName(row.hop))"
        case "unwatched": "where unknown (\(row.phrase.replacingOccurrences(of: "not seen: ", with: "")))"
        default: row.phrase
        }
    }

    static func hopName(_ hop: String) -> String { hop.replacingOccurrences(of: "_", with: " ") }

    /// `backend 3.10/9.20, push service 0.40/1.20 …` (p50/p99 in ms) for the hops measured.
    public static func hopLatencies(_ r: RunResult) -> String? {
        let parts = MetricName.hops.compactMap { name -> String? in
            guard let histogram = r.histograms[name], histogram.count > 0 else { return nil }
            let label = hopName(String(name.dropFirst("hop.".count)))
            return String(format: "%@ %.2f/%.2f", label, Double(histogram.percentile(50)) / 1e6, Double(histogram.percentile(99)) / 1e6)
        }
        return parts.isEmpty ? nil : "hops (p50/p99 ms): " + parts.joined(separator: ", ")
    }
}
