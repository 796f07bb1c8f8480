/// The delivery ledger: what was sent to whom, what each device received, and — at the end —
/// the verdict for every (send, device) pair.
///
/// Terms:
/// - A device is *eligible* while its registration is confirmed (the backend answered the PUT)
///   and not withdrawn. Each change is recorded with the span of the request that made it
///   (request start to answer): the backend may apply it anywhere in that span.
/// - The *expected recipients* of a send are the target user's devices on the targeted
///   platforms that were eligible when the send started and did not change until its answer.
///   Devices that changed inside that window are *indeterminate*: counted, judged neither way.
/// - Each (send, expected device) ends *delivered* (first receipt within the deadline of the
///   send's start), *late* (after it) or *lost* (never). A further receipt of the same pair is a
///   *duplicate*. A receipt by any device not expected is *misdelivered*, as is a push the device
///   cannot attribute to a send meant for it.
/// - A *leak* is any successful read of a notification by someone other than its recipient.
///
/// Times are nanoseconds on one monotonic clock.
public struct DeliveryLedger: Sendable {
    public struct Device: Sendable {
        public var user: Int
        public var platform: Scenario.PlatformName

        public init(user: Int, platform: Scenario.PlatformName) {
            self.user = user
            self.platform = platform
        }
    }

    public struct Send: Sendable {
        public var id: Int
        public var from: Int
        public var to: Int
        public var kind: Scenario.Traffic.Kind
        public var platforms: [Scenario.PlatformName]
        /// When the schedule wanted it to start.
        public var intended: Int64
        public var start: Int64
        public var end: Int64
        /// The backend accepted it (2xx).
        public var succeeded: Bool

        public init(
            id: Int, from: Int, to: Int, kind: Scenario.Traffic.Kind, platforms: [Scenario.PlatformName],
            intended: Int64, start: Int64, end: Int64, succeeded: Bool
        ) {
            self.id = id
            self.from = from
            self.to = to
            self.kind = kind
            self.platforms = platforms
            self.intended = intended
            self.start = start
            self.end = end
            self.succeeded = succeeded
        }
    }

    public struct Receipt: Sendable {
        public enum Attribution: Sendable, Equatable {
            /// The push names this send (by its nonce, or by a fetched payload carrying it).
            case send(Int)
            /// Nothing in the push or its fetched content names a send of this run meant for
            /// the device (no nonce, or the fetch answered 404).
            case unattributable
        }

        public var device: Int
        public var attribution: Attribution
        /// When the push arrived at the device.
        public var time: Int64
        /// When the content was in hand (after a secure or rich fetch); nil for plain pushes.
        public var contentTime: Int64?
        /// The fetched content belonged to another user: a leak as well as a misdelivery.
        public var foreignContent: Bool

        public init(device: Int, attribution: Attribution, time: Int64, contentTime: Int64? = nil, foreignContent: Bool = false) {
            self.device = device
            self.attribution = attribution
            self.time = time
            self.contentTime = contentTime
            self.foreignContent = foreignContent
        }
    }

    public enum Outcome: String, Sendable, CaseIterable {
        case delivered, late, lost, misdelivered, duplicate, indeterminate
    }

    public private(set) var devices: [Device] = []
    public private(set) var devicesOfUser: [[Int]]
    private var transitions: [[(start: Int64, time: Int64, eligible: Bool)]] = []
    public private(set) var sends: [Int: Send] = [:]
    public private(set) var receipts: [Receipt] = []
    /// Successful reads of others' notifications by leak probes.
    public private(set) var probeLeaks = 0

    public init(users: Int) {
        devicesOfUser = Array(repeating: [], count: users)
    }

    public mutating func addDevice(_ device: Device) -> Int {
        devices.append(device)
        transitions.append([])
        devicesOfUser[device.user].append(devices.count - 1)
        return devices.count - 1
    }

    /// Records a change of eligibility made by a request that started at `start` (default: the
    /// same instant) and was answered at `time`, from which the new state holds.
    public mutating func setEligible(_ device: Int, _ eligible: Bool, at time: Int64, since start: Int64? = nil) {
        if transitions[device].last?.eligible == eligible { return }
        transitions[device].append((start ?? time, time, eligible))
    }

    public mutating func record(_ send: Send) {
        sends[send.id] = send
    }

    public mutating func record(_ receipt: Receipt) {
        receipts.append(receipt)
    }

    public mutating func recordProbeLeak() {
        probeLeaks += 1
    }

    private func eligible(_ device: Int, at time: Int64) -> Bool {
        transitions[device].last { $0.time <= time }?.eligible ?? false
    }

    /// Whether a change's span overlaps the send's span.
    private func changed(_ device: Int, within start: Int64, _ end: Int64) -> Bool {
        transitions[device].contains { $0.start <= end && $0.time >= start }
    }

    // MARK: Verdicts

    public struct Counts: Sendable, Equatable, Codable {
        public var expected = 0
        public var delivered = 0
        public var late = 0
        public var lost = 0
        public var misdelivered = 0
        public var duplicates = 0
        public var indeterminate = 0
        public var leaks = 0

        public init() {}

        public static func + (a: Counts, b: Counts) -> Counts {
            var sum = a
            sum.expected += b.expected
            sum.delivered += b.delivered
            sum.late += b.late
            sum.lost += b.lost
            sum.misdelivered += b.misdelivered
            sum.duplicates += b.duplicates
            sum.indeterminate += b.indeterminate
            sum.leaks += b.leaks
            return sum
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
    }

    public struct Verdict: Sendable {
        public var total = Counts()
        public var byUser: [Counts]
        public var byPlatform: [Scenario.PlatformName: Counts] = [:]
        public var deliveries: [Delivery] = []
        /// Times of misdelivered receipts, for the timeseries.
        public var misdeliveredAt: [Int64] = []
    }

    /// Judges every pair. `deadline` separates delivered from late.
    public func verdict(deadline: Duration) -> Verdict {
        let deadlineNs = deadline.nanoseconds
        var verdict = Verdict(byUser: Array(repeating: Counts(), count: devicesOfUser.count))
        func count(_ device: Int, _ body: (inout Counts) -> Void) {
            let user = devices[device].user
            body(&verdict.total)
            body(&verdict.byUser[user])
            body(&verdict.byPlatform[devices[device].platform, default: Counts()])
        }

        // Who each send expected, and who was indeterminate.
        var expected: [Int: Set<Int>] = [:]
        var indeterminate: [Int: Set<Int>] = [:]
        for send in sends.values {
            var wanted = Set<Int>()
            var unsure = Set<Int>()
            for device in devicesOfUser[send.to] where send.platforms.contains(devices[device].platform) {
                if !send.succeeded || changed(device, within: send.start, send.end) {
                    unsure.insert(device)
                } else if eligible(device, at: send.start) {
                    wanted.insert(device)
                }
            }
            expected[send.id] = wanted
            indeterminate[send.id] = unsure
            for device in wanted { count(device) { $0.expected += 1 } }
            for device in unsure { count(device) { $0.indeterminate += 1 } }
        }

        // Receipts in arrival order: the first of a pair decides it, the rest are duplicates.
        var seen = Set<Pair>()
        for receipt in receipts.sorted(by: { $0.time < $1.time }) {
            if receipt.foreignContent { count(receipt.device) { $0.leaks += 1 } }
            guard case .send(let id) = receipt.attribution, let send = sends[id] else {
                count(receipt.device) { $0.misdelivered += 1 }
                verdict.misdeliveredAt.append(receipt.time)
                continue
            }
            let pair = Pair(send: id, device: receipt.device)
            guard seen.insert(pair).inserted else {
                count(receipt.device) { $0.duplicates += 1 }
                continue
            }
            if indeterminate[id]?.contains(receipt.device) == true && !receipt.foreignContent { continue }
            guard expected[id]?.contains(receipt.device) == true, !receipt.foreignContent else {
                count(receipt.device) { $0.misdelivered += 1 }
                verdict.misdeliveredAt.append(receipt.time)
                continue
            }
            let raw = receipt.time - send.start
            let late = raw > deadlineNs
            count(receipt.device) { late ? ($0.late += 1) : ($0.delivered += 1) }
            verdict.deliveries.append(
                Delivery(
                    send: id, device: receipt.device, receivedAt: receipt.time, raw: raw, corrected: receipt.time - send.intended,
                    endToEndRaw: receipt.contentTime.map { $0 - send.start },
                    endToEndCorrected: receipt.contentTime.map { $0 - send.intended }, late: late
                )
            )
        }
        for (id, wanted) in expected {
            for device in wanted where !seen.contains(Pair(send: id, device: device)) {
                count(device) { $0.lost += 1 }
            }
        }
        verdict.total.leaks += probeLeaks
        return verdict
    }

    private struct Pair: Hashable {
        var send: Int
        var device: Int
    }
}
