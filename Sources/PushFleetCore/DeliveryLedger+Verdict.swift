extension DeliveryLedger {
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

        public init() {}

        /// Every count by name, in report order.
        public static var fields: [(name: String, path: WritableKeyPath<Counts, Int>)] {
            [
                ("expected", \.expected), ("delivered", \.delivered), ("late", \.late), ("lost", \.lost),
                ("misdelivered", \.misdelivered), ("duplicates", \.duplicates), ("indeterminate", \.indeterminate), ("leaks", \.leaks),
                ("stale", \.stale), ("unverified", \.unverified), ("unregistered", \.unregistered), ("sent_to_dead_token", \.sentToDeadToken),
            ]
        }

        public static func + (a: Counts, b: Counts) -> Counts {
            var sum = a
            for field in fields { sum[keyPath: field.path] += b[keyPath: field.path] }
            return sum
        }

        private enum CodingKeys: String, CodingKey {
            case expected, delivered, late, lost, misdelivered, duplicates, indeterminate, leaks, stale, unverified, unregistered
            case sentToDeadToken
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

    /// Evidence of one thing that went wrong (or was judged late), for `incidents.csv`.
    public struct Incident: Sendable {
        public var outcome: Outcome
        public var send: Int?
        public var device: Int?
        /// When the push arrived, was refused, or was read; nil for a lost pair.
        public var time: Int64?
        /// A short explanation (the fetch's status, what a probe read).
        public var detail: String
    }

    public struct Verdict: Sendable {
        public var total = Counts()
        public var byUser: [Counts]
        public var byPlatform: [Scenario.PlatformName: Counts] = [:]
        public var deliveries: [Delivery] = []
        /// Times of misdelivered receipts, for the timeseries.
        public var misdeliveredAt: [Int64] = []
        /// The first incidents of each outcome, up to the limit per outcome.
        public var incidents: [Incident] = []
        /// How many incidents of each outcome there were, kept or not.
        public var incidentTotals: [Outcome: Int] = [:]
    }

    private struct Pair: Hashable {
        var send: Int
        var device: Int
    }

    private enum Resolved {
        case send(Send)
        case otherRun
        case unknown
    }

    /// Judges every pair and every push. `deadline` separates delivered from late; at most
    /// `incidentLimit` incidents of each outcome are kept. When listening stopped early (a run
    /// aborted without its drain) at `listeningEnded`, an expected pair whose deadline had not
    /// passed by then is indeterminate, not lost: its push may still have been on its way.
    public func verdict(deadline: Duration, incidentLimit: Int = 1000, listeningEnded: Int64? = nil) -> Verdict {
        let deadlineNs = deadline.nanoseconds
        var verdict = Verdict(byUser: Array(repeating: Counts(), count: devicesOfUser.count))
        func count(_ device: Int, _ path: WritableKeyPath<Counts, Int>) {
            verdict.total[keyPath: path] += 1
            verdict.byUser[devices[device].user][keyPath: path] += 1
            verdict.byPlatform[devices[device].platform, default: Counts()][keyPath: path] += 1
        }
        func incident(_ outcome: Outcome, send: Int?, device: Int?, time: Int64?, _ detail: String = "") {
            verdict.incidentTotals[outcome, default: 0] += 1
            guard verdict.incidentTotals[outcome]! <= incidentLimit else { return }
            verdict.incidents.append(Incident(outcome: outcome, send: send, device: device, time: time, detail: detail))
        }

        let history = transitions.map(Self.ordered)
        // Which send each stored content id belongs to: the backend's answer says, or a device
        // that fetched it found the send's nonce inside.
        var owners: [String: Int] = [:]
        for send in sends.values { if let id = send.contentID { owners[id] = send.id } }
        for receipt in receipts {
            if case .send(let id) = receipt.attribution, case .fetched = receipt.content, let content = receipt.contentID {
                owners[content] = owners[content] ?? id
            }
        }
        func resolve(_ attribution: Attribution) -> Resolved {
            let id: Int?
            switch attribution {
            case .send(let send): id = send
            case .content(let content): id = owners[content]
            case .otherRun: return .otherRun
            case .unattributable: id = nil
            }
            return id.flatMap { sends[$0] }.map(Resolved.send) ?? .unknown
        }

        // Who each send expected, and who was indeterminate.
        var expected = Set<Pair>()
        var unsure = Set<Pair>()
        for send in sends.values {
            for device in devicesOfUser[send.to] where send.platforms.contains(devices[device].platform) {
                let pair = Pair(send: send.id, device: device)
                if !send.succeeded || Self.changed(history[device], within: send.start, send.end) {
                    unsure.insert(pair)
                } else if Self.eligible(history[device], at: send.start) {
                    expected.insert(pair)
                    count(device, \.expected)
                }
            }
        }

        let deadSince = deadTokenPushes(deadline: deadlineNs, resolve: resolve)
        // Receipts and refusals in time order: the first event of a pair decides it.
        enum Event {
            case receipt(Receipt)
            case rejection(Rejection, knownAt: Int64?)
        }
        var events = receipts.map { (time: $0.time, event: Event.receipt($0)) }
        for (index, rejection) in rejections.enumerated() {
            events.append((rejection.time, .rejection(rejection, knownAt: deadSince[index])))
        }
        events.sort { $0.time < $1.time }

        var settled = Set<Pair>()
        var unsureRefused = Set<Pair>()
        for (_, event) in events {
            switch event {
            case .receipt(let receipt):
                let device = receipt.device
                let failure: String? = if case .failed(let reason) = receipt.content { reason } else { nil }
                let send: Send
                switch resolve(receipt.attribution) {
                case .otherRun:
                    count(device, \.stale)
                    incident(.stale, send: nil, device: device, time: receipt.time, "names a send of another run")
                    continue
                case .unknown:
                    if let failure {
                        count(device, \.unverified)
                        incident(.unverified, send: nil, device: device, time: receipt.time, "content of unknown send, fetch \(failure)")
                    } else {
                        count(device, \.misdelivered)
                        verdict.misdeliveredAt.append(receipt.time)
                        incident(.misdelivered, send: nil, device: device, time: receipt.time, "names no send of this run")
                    }
                    continue
                case .send(let found):
                    send = found
                }
                if receipt.time < send.start {
                    count(device, \.stale)
                    incident(.stale, send: send.id, device: device, time: receipt.time, "received before its send started")
                    continue
                }
                // Any successful read by someone other than the recipient is a leak.
                if receipt.contentTime != nil && devices[device].user != send.to {
                    count(device, \.leaks)
                    incident(.leak, send: send.id, device: device, time: receipt.contentTime, "fetched another user's notification")
                }
                let pair = Pair(send: send.id, device: device)
                guard settled.insert(pair).inserted else {
                    count(device, \.duplicates)
                    incident(.duplicate, send: send.id, device: device, time: receipt.time)
                    continue
                }
                if unsure.contains(pair) { continue }
                guard expected.contains(pair) else {
                    count(device, \.misdelivered)
                    verdict.misdeliveredAt.append(receipt.time)
                    incident(.misdelivered, send: send.id, device: device, time: receipt.time, failure.map { "fetch \($0)" } ?? "")
                    continue
                }
                if let failure {
                    count(device, \.unverified)
                    incident(.unverified, send: send.id, device: device, time: receipt.time, "fetch \(failure)")
                    continue
                }
                let raw = receipt.time - send.start
                let late = raw > deadlineNs
                count(device, late ? \.late : \.delivered)
                if late { incident(.late, send: send.id, device: device, time: receipt.time, "after \(raw / 1_000_000) ms") }
                verdict.deliveries.append(
                    Delivery(
                        send: send.id, device: device, receivedAt: receipt.time, raw: raw, corrected: receipt.time - send.intended,
                        endToEndRaw: receipt.contentTime.map { $0 - send.start },
                        endToEndCorrected: receipt.contentTime.map { $0 - send.intended }, late: late
                    )
                )

            case .rejection(let rejection, let knownAt):
                let device = rejection.device
                // After the backend was told (see `deadTokenPushes`), a push to the token is its
                // own doing; before, it could not know.
                func judge(send: Int?) {
                    if knownAt != nil {
                        count(device, \.sentToDeadToken)
                        incident(.sentToDeadToken, send: send, device: device, time: rejection.time, "after the backend was told")
                    } else {
                        count(device, \.unregistered)
                    }
                }
                switch resolve(rejection.attribution) {
                case .otherRun:
                    count(device, \.stale)
                    incident(.stale, send: nil, device: device, time: rejection.time, "refused push names a send of another run")
                case .unknown:
                    judge(send: nil)
                case .send(let send):
                    let targeted = send.to == devices[device].user && send.platforms.contains(devices[device].platform)
                    let pair = Pair(send: send.id, device: device)
                    if !targeted {
                        count(device, \.misdelivered)
                        verdict.misdeliveredAt.append(rejection.time)
                        incident(.misdelivered, send: send.id, device: device, time: rejection.time, "refused as a dead token")
                    } else if !settled.insert(pair).inserted {
                        count(device, \.duplicates)
                        incident(.duplicate, send: send.id, device: device, time: rejection.time, "refused as a dead token")
                    } else {
                        if unsure.contains(pair) { unsureRefused.insert(pair) }
                        judge(send: send.id)
                    }
                }
            }
        }
        for pair in unsure where !unsureRefused.contains(pair) { count(pair.device, \.indeterminate) }
        for pair in expected where !settled.contains(pair) {
            if let listeningEnded, let send = sends[pair.send], send.start + deadlineNs > listeningEnded {
                count(pair.device, \.indeterminate)
                continue
            }
            count(pair.device, \.lost)
            incident(.lost, send: pair.send, device: pair.device, time: nil)
        }
        for leak in probeLeaks {
            count(leak.device, \.leaks)
            incident(.leak, send: nil, device: leak.device, time: leak.time, leak.detail)
        }
        verdict.incidents.sort { ($0.time ?? .max, $0.send ?? 0, $0.device ?? 0) < ($1.time ?? .max, $1.send ?? 0, $1.device ?? 0) }
        return verdict
    }

    /// The refused pushes the backend should have known not to make (by rejection index), with
    /// when it knew. It was told by another send whose push to the same token was refused: at
    /// that send's answer, or at the refusal's arrival if later (a backend may answer before it
    /// pushes). A refused push counts against it only if its send started after that and no
    /// registration of the device was requested in between (the backend may have taken a fresh
    /// registration of the token for a live one). A refused push that names no send is taken to
    /// have started `deadline` before it arrived, and never tells: the backend's knowledge is
    /// dated only by sends the ledger can place.
    private func deadTokenPushes(deadline: Int64, resolve: (Attribution) -> Resolved) -> [Int: Int64] {
        var result: [Int: Int64] = [:]
        let byDevice = Dictionary(grouping: rejections.indices, by: { rejections[$0].device })
        for (device, indices) in byDevice {
            // Earliest knowledge first: the first tell that applies to a refusal is the one it counts from.
            let told: [(send: Int, start: Int64, known: Int64)] = indices.compactMap { index in
                guard case .send(let send) = resolve(rejections[index].attribution) else { return nil }
                return (send.id, send.start, max(send.end, rejections[index].time))
            }.sorted { $0.known < $1.known }
            guard !told.isEmpty else { continue }
            let registrations = transitions[device].filter(\.eligible)
            for index in indices {
                let rejection = rejections[index]
                let own: (id: Int?, start: Int64, end: Int64)
                switch resolve(rejection.attribution) {
                case .send(let send): own = (send.id, send.start, send.end)
                case .unknown: own = (nil, rejection.time - deadline, rejection.time)
                case .otherRun: continue
                }
                let known = told.first { tell in
                    tell.send != own.id && tell.known < own.start
                        && !registrations.contains { $0.time > tell.start && $0.start < own.end }
                }?.known
                if let known { result[index] = known }
            }
        }
        return result
    }

    /// A device's changes in time order, each one a real change of state.
    static func ordered(_ changes: [Transition]) -> [Transition] {
        var result: [Transition] = []
        for change in changes.enumerated().sorted(by: { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }).map(\.element)
        where result.last?.eligible != change.eligible && !(result.isEmpty && !change.eligible) {
            result.append(change)
        }
        return result
    }

    static func eligible(_ history: [Transition], at time: Int64) -> Bool {
        history.last { $0.time <= time }?.eligible ?? false
    }

    /// Whether a change's span overlaps the send's span.
    static func changed(_ history: [Transition], within start: Int64, _ end: Int64) -> Bool {
        history.contains { $0.start <= end && $0.time >= start }
    }
}
