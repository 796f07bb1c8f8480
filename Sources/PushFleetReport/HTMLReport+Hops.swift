import Foundation
import PushFleetCore
import PushFleetLedger
import PushFleetResults

/// The "where pushes went" section: each platform's funnel, why pairs were lost, late or
/// unverified, and where the time of pushes at each delivery percentile went.
extension HTMLReport {
    static func whereItWent(_ r: RunResult) -> String {
        guard let hops = r.hops else { return "<p class=\"note\">This run recorded no hops (a run of an earlier pushfleet).</p>" }
        var html = ""
        if hops.view == "unknown" {
            html += "<p class=\"note\" id=\"hops-unwatched\">The push service was not watched: \(e(hops.note ?? "")). Where pairs were lost is unknown; the push service's stages of the funnel are empty.</p>"
        } else if let note = hops.note {
            html += "<p class=\"note\">The push service was watched; \(e(note)).</p>"
        }
        let platforms = funnelPlatforms(r)
        html += funnelTable(hops, platforms: platforms.shown) + funnelChart(hops, platforms: platforms.shown) + leftOutNote(hops, platforms.leftOut)
        html += whyTable(hops) + breakdownChart(hops)
        return html
    }

    /// The funnel's platforms: those the fleet has devices of, and any other a pair, outcome or
    /// explanation happened on. A platform of neither has only sends, counted under it because a
    /// send named every platform (a secure or rich send does), so it gets a note, not a column.
    static func funnelPlatforms(_ r: RunResult) -> (shown: [String], leftOut: [String]) {
        guard let hops = r.hops else { return ([], []) }
        let all = hops.funnel.keys.sorted()
        let shown = all.filter { platform in
            if r.devices.byPlatform[platform, default: 0] > 0 { return true }
            let funnel = hops.funnel[platform]!
            let pairs = [funnel.expected, funnel.handed ?? 0, funnel.accepted ?? 0, funnel.written ?? 0, funnel.received, funnel.inHand]
            let outcomes = r.deliveryByPlatform[platform].map { counts in DeliveryLedger.Counts.fields.map { counts[keyPath: $0.path] } } ?? []
            return (pairs + outcomes).contains { $0 != 0 } || hops.why.contains { $0.platform == platform }
        }
        return (shown, all.filter { !shown.contains($0) })
    }

    static func leftOutNote(_ hops: RunResult.Hops, _ platforms: [String]) -> String {
        guard !platforms.isEmpty else { return "" }
        let list = platforms.map { "\(e($0)) (\(hops.funnel[$0]!.sends) sends named it)" }.joined(separator: ", ")
        return "<p class=\"note\" id=\"funnel-left-out\">Left out, as the fleet has no devices of it and no pair of it was expected or seen: \(list).</p>"
    }

    /// The funnel's stages: sends, then (send, device) pairs.
    static let funnelStages: [(String, @Sendable (DeliveryLedger.Funnel) -> Int?)] = [
        ("sends", { $0.sends }), ("accepted by the backend", { $0.sendsAccepted }), ("pairs expected", { $0.expected }),
        ("handed to the push service", { $0.handed }), ("accepted by it", { $0.accepted }), ("written to a device", { $0.written }),
        ("received", { $0.received }), ("in hand (fetched)", { $0.inHand }),
    ]

    static func funnelTable(_ hops: RunResult.Hops, platforms: [String]) -> String {
        guard !platforms.isEmpty else { return hops.funnel.isEmpty ? "<p class=\"note\">No sends were judged.</p>" : "" }
        let rows = funnelStages.map { stage in
            [e(stage.0)] + platforms.map { platform -> String in
                let funnel = hops.funnel[platform]!
                guard let value = stage.1(funnel) else { return "—" }
                let pairs = stage.0 != "sends" && stage.0 != "accepted by the backend" && stage.0 != "pairs expected"
                return pairs && funnel.expected > 0 ? "\(value) (\(String(format: "%.1f", Double(value) / Double(funnel.expected) * 100))%)" : String(value)
            }
        }
        return table(["stage"] + platforms.map(e), rows, id: "funnel-table")
            + "<p class=\"note\">Sends count calls (a plain send to three platforms counts under each); the stages below them count expected (send, device) pairs by how far each got, as a share of those expected. — means the push service was not watched.</p>"
    }

    /// One group of bars per platform, a bar per pair stage, each with its count as text.
    static func funnelChart(_ hops: RunResult.Hops, platforms: [String]) -> String {
        let stages = funnelStages.dropFirst(2)
        let width = 760.0, rowHeight = 16.0, left = 190.0
        let height = 50 + Double(max(platforms.count, 1)) * (Double(stages.count) * rowHeight + 14)
        let maximum = Double(max(1, platforms.map { hops.funnel[$0]!.expected }.max() ?? 1))
        var svg = "<svg id=\"chart-funnel\" class=\"chart\" role=\"img\" aria-labelledby=\"chart-funnel-title\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" xmlns=\"http://www.w3.org/2000/svg\">"
        svg += "<title id=\"chart-funnel-title\">Funnel per platform (expected send–device pairs by how far they got)</title>"
        svg += "<text x=\"10\" y=\"20\" class=\"chart-title\">Funnel per platform (expected send–device pairs by how far they got)</text>"
        var y = 36.0
        for platform in platforms {
            let funnel = hops.funnel[platform]!
            svg += "<text x=\"10\" y=\"\(y + 10)\" class=\"axis-label\" font-weight=\"700\">\(e(platform))</text>"
            for (index, stage) in stages.enumerated() {
                let value = stage.1(funnel)
                let barWidth = Double(value ?? 0) / maximum * (width - left - 120)
                svg += "<text x=\"\(left - 6)\" y=\"\(y + 11)\" text-anchor=\"end\" class=\"tick\">\(e(stage.0))</text>"
                svg += "<rect x=\"\(left)\" y=\"\(y)\" width=\"\(String(format: "%.1f", max(barWidth, (value ?? 0) > 0 ? 1 : 0)))\" height=\"\(rowHeight - 4)\" fill=\"\(SVGChart.colours[index % SVGChart.colours.count])\"/>"
                svg += "<text x=\"\(String(format: "%.1f", left + barWidth + 4))\" y=\"\(y + 11)\" class=\"tick\">\(value.map(String.init) ?? "not watched")</text>"
                y += rowHeight
            }
            y += 14
        }
        return svg + "</svg>"
    }

    static func whyTable(_ hops: RunResult.Hops) -> String {
        guard !hops.why.isEmpty else {
            return "<p class=\"note\" id=\"why-none\">No pair was lost, late or unverified.</p>"
        }
        return "<h3>Why lost, late or unverified</h3>"
            + table(
                ["outcome", "hop", "what happened", "platform", "status", "reason", "pairs", "look at"],
                hops.why.map { row in
                    [
                        e(row.outcome), e(row.hop.replacingOccurrences(of: "_", with: " ")),
                        e(row.phrase + (row.byToken == true ? " (matched by token and time)" : "")), e(row.platform), row.status.map(String.init) ?? "",
                        e(row.reason ?? ""), String(row.count), e(row.advice ?? ""),
                    ]
                },
                id: "why-table"
            )
            + "<p class=\"note\">Each lost, late or unverified pair once, by the hop where it went wrong: the backend (it accepted the send and pushed nothing for the device, or pushed to a token no device has), the hub, the push service (refused, dropped by a fault, held or expired for an offline device), the device (written to its socket, never received) or the fetch. A late pair is put at the hop that took longest. docs/reports.md defines each.</p>"
    }

    /// Stacked bars: for the pushes at each delivery percentile, the mean time of each hop.
    static func breakdownChart(_ hops: RunResult.Hops) -> String {
        let width = 760.0, rowHeight = 26.0, left = 80.0, right = 140.0
        let rows = hops.breakdown
        let height = 70 + Double(max(rows.count, 1)) * rowHeight + 30
        let maximum = max(0.001, rows.map(\.deliveryMs).max() ?? 0)
        let parts: [(String, KeyPath<RunResult.Breakdown, Double>)] = [
            ("backend", \.backendMs), ("hub", \.hubMs), ("push service", \.pushServiceMs), ("device", \.deviceMs),
        ]
        var svg = "<svg id=\"chart-hops\" class=\"chart\" role=\"img\" aria-labelledby=\"chart-hops-title\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" xmlns=\"http://www.w3.org/2000/svg\">"
        svg += "<title id=\"chart-hops-title\">Where the time went, by delivery percentile</title>"
        svg += "<text x=\"10\" y=\"20\" class=\"chart-title\">Where the time went: pushes at each delivery percentile, mean ms per hop</text>"
        var x = left
        for (index, part) in parts.enumerated() {
            svg += "<rect x=\"\(x)\" y=\"30\" width=\"10\" height=\"10\" fill=\"\(SVGChart.colours[index])\"/><text x=\"\(x + 14)\" y=\"39\" class=\"legend\">\(part.0)</text>"
            x += 110
        }
        guard !rows.isEmpty else {
            return svg + "<text x=\"10\" y=\"70\" class=\"tick\">No delivered push said where it went (the push service is not pushfleet's).</text></svg>"
        }
        var y = 56.0
        for row in rows {
            svg += "<text x=\"\(left - 6)\" y=\"\(y + 15)\" text-anchor=\"end\" class=\"tick\">p\(SVGChart.number(row.percentile))</text>"
            var start = left
            for (index, part) in parts.enumerated() {
                let value = row[keyPath: part.1]
                let span = value / maximum * (width - left - right)
                guard span > 0 else { continue }
                svg += "<rect x=\"\(String(format: "%.1f", start))\" y=\"\(y)\" width=\"\(String(format: "%.1f", span))\" height=\"\(rowHeight - 8)\" fill=\"\(SVGChart.colours[index])\"><title>\(part.0): \(String(format: "%.2f", value)) ms</title></rect>"
                start += span
            }
            let label = parts.map { String(format: "%.2f", row[keyPath: $0.1]) }.joined(separator: " + ")
            svg += "<text x=\"\(String(format: "%.1f", start + 4))\" y=\"\(y + 15)\" class=\"tick\">\(String(format: "%.2f", row.deliveryMs)) ms</text>"
            svg += "<text x=\"\(left)\" y=\"\(y + rowHeight + 2)\" class=\"tick\" fill=\"#555\">\(label) (\(row.pushes) pushes)</text>"
            y += rowHeight + 6
        }
        return svg + "</svg>"
    }
}
