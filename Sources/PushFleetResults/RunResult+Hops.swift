import PushFleetCore
public import PushFleetLedger

extension RunResult {
    /// Where the run's pushes went: how much of the push service the run saw, each platform's
    /// funnel, and every lost, late and unverified pair counted by where and why
    /// (docs/reports.md, "Why lost").
    public struct Hops: Sendable, Codable {
        /// `watched` (pushfleet's push service, its reports in hand) or `unknown`.
        public var view: String
        /// Why the push service was not watched, or the gaps its reports had.
        public var note: String?
        /// By platform: sends, and expected pairs by how far they got.
        public var funnel: [String: DeliveryLedger.Funnel]
        /// Most first.
        public var why: [Why]
        /// Where the time went for pushes at several percentiles of the delivery latency.
        public var breakdown: [Breakdown]

        package init(view: String, note: String?, funnel: [String: DeliveryLedger.Funnel], why: [Why], breakdown: [Breakdown]) {
            self.view = view
            self.note = note
            self.funnel = funnel
            self.why = why
            self.breakdown = breakdown
        }
    }

    /// The pushes around one percentile of the (raw) delivery latency, and the mean time each hop
    /// took for them: the hops add up to their mean delivery latency, so the stack shows where the
    /// time of a p99 push went (each hop's own percentiles are in `histograms`).
    public struct Breakdown: Sendable, Codable, Equatable {
        public var percentile: Double
        /// Pushes averaged (those within half a percent of the rank, at least one).
        public var pushes: Int
        public var deliveryMs: Double
        public var backendMs: Double
        public var hubMs: Double
        public var pushServiceMs: Double
        public var deviceMs: Double

        package init(percentile: Double, pushes: Int, deliveryMs: Double, backendMs: Double, hubMs: Double, pushServiceMs: Double, deviceMs: Double) {
            self.percentile = percentile
            self.pushes = pushes
            self.deliveryMs = deliveryMs
            self.backendMs = backendMs
            self.hubMs = hubMs
            self.pushServiceMs = pushServiceMs
            self.deviceMs = deviceMs
        }
    }

    /// How many pairs of one outcome went wrong at one hop for one reason.
    public struct Why: Sendable, Codable, Equatable {
        /// `lost`, `late` or `unverified`.
        public var outcome: String
        /// `backend`, `hub`, `push_service`, `device`, `fetch` or `unknown`.
        public var hop: String
        /// What happened there (`refused`, `not_pushed`, `slow`…; docs/reports.md lists them).
        public var cause: String
        public var platform: String
        /// A refusal's status and reason (`403`, `InvalidProviderToken`), a fetch's failure.
        public var status: Int?
        public var reason: String?
        /// Matched to its pairs by token and time (the push named no send the run knew).
        public var byToken: Bool?
        public var count: Int
        /// The cause in words.
        public var phrase: String
        /// What to look at, when there is a usual suspect.
        public var advice: String?

        package init(
            outcome: String, hop: String, cause: String, platform: String, status: Int?, reason: String?, byToken: Bool?, count: Int, phrase: String,
            advice: String?
        ) {
            self.outcome = outcome
            self.hop = hop
            self.cause = cause
            self.platform = platform
            self.status = status
            self.reason = reason
            self.byToken = byToken
            self.count = count
            self.phrase = phrase
            self.advice = advice
        }

        /// `apns 403 InvalidProviderToken`.
        public var detail: String { DeliveryLedger.Explanation.detail(platform: platform, status: status, reason: reason) }
    }
}
