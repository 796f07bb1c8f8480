public import PushFleetCore

/// What the ledger's judgement says: outcomes, their counts, and the evidence behind them.
extension DeliveryLedger {
    /// Every (send, device) pair and every push ends as exactly one of these (see ``DeliveryLedger``).
    public enum Outcome: String, Sendable, CaseIterable, Codable {
        case delivered, late, lost, misdelivered, duplicate, indeterminate, stale, unverified, unregistered, undecryptable
        case sentToDeadToken = "sent_to_dead_token"
        case leak
        /// Held for an offline device and given up for a newer push, as its platform promises
        /// (APNs keeps one per device): not received, and not lost either.
        case replaced
        /// The send's answer was an error or a timeout, and its push arrived all the same
        /// (Jepsen's word): the backend did the work without saying so.
        case recovered
    }

    public struct Counts: Sendable, Equatable, Codable {
        public var expected = 0
        public var delivered = 0
        public var late = 0
        public var lost = 0
        public var misdelivered = 0
        public var duplicates = 0
        public var indeterminate = 0
        public var leaks = 0
        public var stale = 0
        public var unverified = 0
        public var unregistered = 0
        public var sentToDeadToken = 0
        /// Pushes a browser could not decrypt (RFC 8291): their sends cannot be told.
        public var undecryptable = 0
        public var replaced = 0
        public var recovered = 0

        public init() {}

        /// Every count by name, in report order.
        public static var fields: [(name: String, path: WritableKeyPath<Counts, Int>)] {
            [
                ("expected", \.expected), ("delivered", \.delivered), ("late", \.late), ("lost", \.lost),
                ("misdelivered", \.misdelivered), ("duplicates", \.duplicates), ("indeterminate", \.indeterminate), ("leaks", \.leaks),
                ("stale", \.stale), ("unverified", \.unverified), ("unregistered", \.unregistered), ("sent_to_dead_token", \.sentToDeadToken),
                ("undecryptable", \.undecryptable), ("replaced", \.replaced), ("recovered", \.recovered),
            ]
        }

        public static func + (a: Counts, b: Counts) -> Counts {
            var sum = a
            for field in fields { sum[keyPath: field.path] += b[keyPath: field.path] }
            return sum
        }

        private enum CodingKeys: String, CodingKey {
            case expected, delivered, late, lost, misdelivered, duplicates, indeterminate, leaks, stale, unverified, unregistered
            case sentToDeadToken, undecryptable, replaced, recovered
        }

        /// Counts written before a field existed read it as zero.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            func read(_ key: CodingKeys) throws -> Int { try c.decodeIfPresent(Int.self, forKey: key) ?? 0 }
            expected = try read(.expected)
            delivered = try read(.delivered)
            late = try read(.late)
            lost = try read(.lost)
            misdelivered = try read(.misdelivered)
            duplicates = try read(.duplicates)
            indeterminate = try read(.indeterminate)
            leaks = try read(.leaks)
            stale = try read(.stale)
            unverified = try read(.unverified)
            unregistered = try read(.unregistered)
            sentToDeadToken = try read(.sentToDeadToken)
            undecryptable = try read(.undecryptable)
            replaced = try read(.replaced)
            recovered = try read(.recovered)
        }
    }

    /// One delivered or late pair, with its latencies, for the metrics.
    public struct Delivery: Sendable {
        public var send: Int
        public var device: Int
        public var receivedAt: Int64
        /// Receive time − send start.
        public var raw: Int64
        /// Receive time − intended start.
        public var corrected: Int64
        /// Content in hand − send start / − intended start (secure and rich only).
        public var endToEndRaw: Int64?
        public var endToEndCorrected: Int64?
        public var late: Bool
        /// Each hop's time, when the push service said where the push went.
        public var hops: HopTimes?
    }

    /// Evidence of one thing that went wrong (or was judged late), for `incidents.csv`.
    public struct Incident: Sendable {
        public var outcome: Outcome
        public var send: Int?
        public var device: Int?
        /// When the push arrived, was refused, or was read; nil for a lost pair.
        public var time: Int64?
        /// A short explanation (the fetch's status, what a probe read).
        public var detail: String
        /// For a lost, late or unverified pair: where and why.
        public var explanation: Explanation?
        /// For a lost or late pair whose push the push service reported: its part.
        public var push: PushPart?
    }

    public struct Verdict: Sendable {
        public var total = Counts()
        public var byUser: [Counts]
        public var byPlatform: [Scenario.PlatformName: Counts] = [:]
        /// The delivered and late pairs of the sends still held; see ``foldedDeliveries``.
        public var deliveries: [Delivery] = []
        /// Delivered and late pairs of sends folded during the run, not in ``deliveries`` (their
        /// latencies went to the folding caller's summaries).
        public var foldedDeliveries = 0
        /// Times of misdelivered receipts, for the timeseries.
        public var misdeliveredAt: [Int64] = []
        /// The first incidents of each outcome, up to the limit per outcome.
        public var incidents: [Incident] = []
        /// How many incidents of each outcome there were, kept or not.
        public var incidentTotals: [Outcome: Int] = [:]
        /// Every lost, late and unverified pair, counted by where and why.
        public var explanations: [Explanation: Int] = [:]
        /// Per platform, the sends and expected pairs by how far they got.
        public var funnel: [Scenario.PlatformName: Funnel] = [:]
        /// How much of the push service the run saw.
        public var pushServiceView: PushServiceView = .unknown("the push service was not watched")
    }
}
