import PushFleetCore
import PushFleetLedger
import PushFleetResults

/// The delivered pairs of folded sends, kept as summaries of fixed size rather than one row each
/// (docs/design.md, "Folding"): the delivery, end-to-end and hop histograms as a run reports
/// them, a ``LatencySketch`` per user and per second, and the hop times summed by delivery
/// latency for the breakdown.
struct DeliveryDigest {
    /// Hop times summed over the deliveries of one latency bucket.
    struct HopSums {
        var count = 0
        var raw: Int64 = 0
        var backend: Int64 = 0
        var hub: Int64 = 0
        var pushService: Int64 = 0
        var device: Int64 = 0
    }

    var count = 0
    var histograms: [String: LatencyHistogram] = [:]
    var byUser: [Int: LatencySketch] = [:]
    var bySecond: [Int: LatencySketch] = [:]
    var byLatency: [ClosedRange<Int64>: HopSums] = [:]

    var isEmpty: Bool { count == 0 }

    /// Adds deliveries; `user` gives a device's user, `second` an instant's second of the run.
    mutating func add(_ deliveries: [DeliveryLedger.Delivery], user: (Int) -> Int, second: (Int64) -> Int) {
        guard !deliveries.isEmpty else { return }
        count += deliveries.count
        // Recorded in place, as ResultBuilder.deliveryHistograms would make them: a fold's
        // own set of histograms (some 2 MB) would churn the allocator at every fold.
        func record(_ name: String, _ value: Int64) { histograms[name, default: LatencyHistogram()].record(nanoseconds: value) }
        for item in deliveries {
            record(MetricName.delivery, item.corrected)
            record(MetricName.delivery + ".raw", item.raw)
            if let corrected = item.endToEndCorrected, let raw = item.endToEndRaw {
                record(MetricName.endToEnd, corrected)
                record(MetricName.endToEnd + ".raw", raw)
            }
            byUser[user(item.device), default: LatencySketch()].record(nanoseconds: item.raw)
            bySecond[second(item.receivedAt), default: LatencySketch()].record(nanoseconds: item.raw)
            guard let hops = item.hops else { continue }
            record(MetricName.hopBackend, hops.backendCorrected)
            record(MetricName.hopBackend + ".raw", hops.backend)
            if let time = hops.hub { record(MetricName.hopHub, time) }
            record(MetricName.hopPushService, hops.pushService)
            record(MetricName.hopDevice, hops.device)
            if let time = hops.fetch { record(MetricName.hopFetch, time) }
            let bucket = LatencySketch.range(of: item.raw)
            var sums = byLatency[bucket] ?? HopSums()
            sums.count += 1
            sums.raw += item.raw
            sums.backend += hops.backend
            sums.hub += hops.hub ?? 0
            sums.pushService += hops.pushService
            sums.device += hops.device
            byLatency[bucket] = sums
        }
    }

    /// For each percentile, the hop means of the deliveries around its rank: those of the latency
    /// buckets within half a percent of it, each in proportion to its share of that span.
    func breakdown(_ percentiles: [Double]) -> [RunResult.Breakdown] {
        let buckets = byLatency.sorted { $0.key.lowerBound < $1.key.lowerBound }.map(\.value)
        let total = buckets.reduce(0) { $0 + $1.count }
        guard total > 0 else { return [] }
        let half = max(0, total / 200)
        return percentiles.map { percentile in
            let rank = min(total - 1, max(0, Int((percentile / 100 * Double(total)).rounded(.up)) - 1))
            let span = max(0, rank - half)...min(total - 1, rank + half)
            var sum = (count: 0.0, raw: 0.0, backend: 0.0, hub: 0.0, pushService: 0.0, device: 0.0)
            var first = 0
            for bucket in buckets {
                let ranks = first...(first + bucket.count - 1)
                first += bucket.count
                guard ranks.overlaps(span) else { continue }
                let share = Double(min(ranks.upperBound, span.upperBound) - max(ranks.lowerBound, span.lowerBound) + 1) / Double(bucket.count)
                sum.count += share * Double(bucket.count)
                sum.raw += share * Double(bucket.raw)
                sum.backend += share * Double(bucket.backend)
                sum.hub += share * Double(bucket.hub)
                sum.pushService += share * Double(bucket.pushService)
                sum.device += share * Double(bucket.device)
            }
            let n = max(sum.count, 1)
            return RunResult.Breakdown(
                percentile: percentile, pushes: span.count, deliveryMs: sum.raw / n / 1e6, backendMs: sum.backend / n / 1e6,
                hubMs: sum.hub / n / 1e6, pushServiceMs: sum.pushService / n / 1e6, deviceMs: sum.device / n / 1e6
            )
        }
    }
}
