import PushFleetCore
public import PushFleetLedger

extension RunResult {
    /// A span of the traffic judged on its own: only the sends whose intended start fell in it,
    /// each followed to its end (a push sent late in the span may arrive after it). Capacity
    /// steps are judged so, after a warm-up that is left out.
    public struct Window: Sendable, Codable {
        /// From the run's start.
        public var startSecond: Double
        public var endSecond: Double
        /// Calls to the send endpoint per second the schedule asked for in the span, made and
        /// dropped (a send made once per platform counts once per call).
        public var offeredRate: Double
        /// Expected pairs delivered (in time or late) per second of the span.
        public var throughput: Double
        public var delivery: DeliveryLedger.Counts
        public var counters: [String: Double]
        /// Delivery, send and hop latencies of the span's sends.
        public var histograms: [String: LatencyHistogram]
        public var thresholds: [WindowThreshold]
        /// Pairs sent but not yet settled (delivered, in time or late) at the end of each slice.
        public var backlog: [Int]
        /// The most the backlog may hold: the pairs of one deadline at the span's rate.
        public var backlogBound: Int
        public var backlogGrowing: Bool
        public var hops: Hops?
        /// What failed in the span, sustained; empty when it met every rule.
        public var breaches: [String]

        package init(
            startSecond: Double, endSecond: Double, offeredRate: Double, throughput: Double, delivery: DeliveryLedger.Counts,
            counters: [String: Double], histograms: [String: LatencyHistogram], thresholds: [WindowThreshold], backlog: [Int],
            backlogBound: Int, backlogGrowing: Bool, hops: Hops?, breaches: [String]
        ) {
            self.startSecond = startSecond
            self.endSecond = endSecond
            self.offeredRate = offeredRate
            self.throughput = throughput
            self.delivery = delivery
            self.counters = counters
            self.histograms = histograms
            self.thresholds = thresholds
            self.backlog = backlog
            self.backlogBound = backlogBound
            self.backlogGrowing = backlogGrowing
            self.hops = hops
            self.breaches = breaches
        }

        public var met: Bool { breaches.isEmpty }
    }

    /// A threshold judged over a window and over each of its slices: a breach counts only when
    /// it holds over the whole window and in at least half of the slices, so one spike does not
    /// fail a step — but a rule on what is wrong at any load (``exact``) breaches on the window.
    public struct WindowThreshold: Sendable, Codable, Equatable {
        public var metric: String
        public var expression: String
        public var measured: Double?
        public var unit: String
        public var passed: Bool
        public var slices: Int
        public var slicesFailed: Int
        /// A rule on pushes to the wrong device, duplicates, leaks, stale or unverified content,
        /// or sends to dead tokens: one is one too many, whichever slice it fell in.
        public var exact: Bool

        /// The metrics whose rules breach over the window alone.
        public static let exactMetrics = RunResult.correctnessMetrics.union(["delivery.stale", "delivery.unverified", "delivery.sent_to_dead_token", "delivery.undecryptable"])

        package init(metric: String, expression: String, measured: Double?, unit: String, passed: Bool, slices: Int, slicesFailed: Int) {
            self.metric = metric
            self.expression = expression
            self.measured = measured
            self.unit = unit
            self.passed = passed
            self.slices = slices
            self.slicesFailed = slicesFailed
            self.exact = Self.exactMetrics.contains(metric)
        }

        public var sustained: Bool { !passed && (exact || slicesFailed * 2 >= slices) }
    }
}
