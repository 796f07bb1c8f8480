import PushFleetCore
import PushFleetLedger
import PushFleetResults

/// The hop-by-hop part of a result: each hop's latency histograms, the funnels and the
/// explanations of lost, late and unverified pairs.
extension ResultBuilder {
    /// Each hop of every delivered push that says where it went; `hop.backend` also raw.
    static func hopHistograms(_ deliveries: [DeliveryLedger.Delivery]) -> [String: LatencyHistogram] {
        var backend = LatencyHistogram()
        var backendRaw = LatencyHistogram()
        var hub = LatencyHistogram()
        var pushService = LatencyHistogram()
        var device = LatencyHistogram()
        var fetch = LatencyHistogram()
        for item in deliveries {
            guard let hops = item.hops else { continue }
            backend.record(nanoseconds: hops.backendCorrected)
            backendRaw.record(nanoseconds: hops.backend)
            if let time = hops.hub { hub.record(nanoseconds: time) }
            pushService.record(nanoseconds: hops.pushService)
            device.record(nanoseconds: hops.device)
            if let time = hops.fetch { fetch.record(nanoseconds: time) }
        }
        guard backend.count > 0 else { return [:] }
        var histograms = [
            MetricName.hopBackend: backend, MetricName.hopBackend + ".raw": backendRaw, MetricName.hopPushService: pushService,
            MetricName.hopDevice: device,
        ]
        if hub.count > 0 { histograms[MetricName.hopHub] = hub }
        if fetch.count > 0 { histograms[MetricName.hopFetch] = fetch }
        return histograms
    }

    static func hops(_ verdict: DeliveryLedger.Verdict, digest: DeliveryDigest? = nil) -> RunResult.Hops {
        let view: String
        var note: String?
        switch verdict.pushServiceView {
        case .unknown(let reason):
            view = "unknown"
            note = reason
        case .watched(_, let gaps):
            view = "watched"
            if !gaps.isEmpty { note = "its reports had \(gaps.count) gap\(gaps.count == 1 ? "" : "s"): pairs in them are unknown" }
        }
        let why = verdict.explanations.map { explanation, count in
            RunResult.Why(
                outcome: explanation.outcome.rawValue, hop: explanation.hop.rawValue, cause: explanation.cause.rawValue,
                platform: explanation.platform.rawValue, status: explanation.status, reason: explanation.reason, byToken: explanation.byToken ? true : nil,
                count: count, phrase: explanation.cause.phrase, advice: explanation.cause.advice(status: explanation.status, hop: explanation.hop)
            )
        }.sorted { ($1.count, $0.outcome, $0.hop, $0.cause, $0.detail) < ($0.count, $1.outcome, $1.hop, $1.cause, $1.detail) }
        return RunResult.Hops(
            view: view, note: note, funnel: Dictionary(uniqueKeysWithValues: verdict.funnel.map { ($0.key.rawValue, $0.value) }), why: why,
            breakdown: digest?.breakdown(breakdownPercentiles) ?? breakdown(verdict)
        )
    }

    /// The percentiles whose pushes are broken down by hop.
    static let breakdownPercentiles: [Double] = [50, 90, 99, 99.9]

    /// For each percentile, the deliveries within half a percent of its rank (at least one), and
    /// the mean of each hop over them.
    static func breakdown(_ verdict: DeliveryLedger.Verdict) -> [RunResult.Breakdown] {
        let timed = verdict.deliveries.compactMap { delivery in delivery.hops.map { (raw: delivery.raw, hops: $0) } }.sorted { $0.raw < $1.raw }
        guard !timed.isEmpty else { return [] }
        let half = max(0, timed.count / 200)
        return breakdownPercentiles.map { percentile in
            let rank = min(timed.count - 1, max(0, Int((percentile / 100 * Double(timed.count)).rounded(.up)) - 1))
            let slice = timed[max(0, rank - half)...min(timed.count - 1, rank + half)]
            func mean(_ value: (DeliveryLedger.HopTimes) -> Int64) -> Double {
                Double(slice.reduce(Int64(0)) { $0 + value($1.hops) }) / Double(slice.count) / 1e6
            }
            return RunResult.Breakdown(
                percentile: percentile, pushes: slice.count, deliveryMs: Double(slice.reduce(Int64(0)) { $0 + $1.raw }) / Double(slice.count) / 1e6,
                backendMs: mean(\.backend), hubMs: mean { $0.hub ?? 0 }, pushServiceMs: mean(\.pushService), deviceMs: mean(\.device)
            )
        }
    }

    /// `refused 403 InvalidProviderToken`, `not_pushed`, `fetch_failed status_404`.
    static func reason(_ explanation: DeliveryLedger.Explanation) -> String {
        ([explanation.cause.rawValue] + [explanation.status.map(String.init), explanation.reason].compactMap { $0 }).joined(separator: " ")
            + (explanation.byToken ? " (matched by token and time)" : "")
    }
}
