import PushFleetCore

extension DeliveryLedger {
    /// What folding judged and let go of: the verdict of the folded sends (without their
    /// deliveries, which went to the caller), and the sends the kept incidents name.
    struct Folds: Sendable {
        var verdict: Verdict?
        var sends = 0
        var deliveries = 0
        /// Sends named by the folded verdict's incidents, for their rows.
        var incidentSends: [Int: Send] = [:]
    }

    /// A ledger with this one's fleet, registration history and horizon (shared, not copied) and
    /// no material of its own.
    init(fleetOf other: DeliveryLedger) {
        devicesOfUser = other.devicesOfUser
        devices = other.devices
        transitions = other.transitions
        horizon = other.horizon
    }

    /// Sends recorded, folded ones included.
    public var sendsRecorded: Int { sends.count + folds.sends }

    /// Sends judged and let go of so far.
    public var foldedSends: Int { folds.sends }

    /// A send by id, also when it was folded and an incident names it.
    public func knownSend(_ id: Int) -> Send? {
        sends[id] ?? folds.incidentSends[id]
    }

    /// Judges and lets go of the sends that are settled for good, so that a long run keeps only
    /// what is open (docs/design.md, "Folding"). A send is settled for good when its answer came
    /// more than the horizon before `now`, so nothing more can be credited to it, and nothing
    /// about it needs the rest of the ledger: every pair it expected was received, and no refusal
    /// or unreceived push of the push service names it. Anything else stays for the end's
    /// judgement, with its evidence.
    ///
    /// Judging the folded sends apart gives what judging them with everything else would give:
    /// the judge decides such a send from its own receipts alone (duplicates, misdeliveries and
    /// leaks included). Returns their deliveries, which
    /// the caller keeps in summary form; the counts, incidents and funnels stay here and are
    /// added to the final verdict. Without a horizon nothing is folded.
    public mutating func fold(now: Int64, deadline: Duration, incidentLimit: Int) -> [Delivery] {
        guard let horizon = horizon?.nanoseconds else { return [] }
        let cutoff = Saturating.subtract(now, horizon)
        var candidates: [Int: Send] = [:]
        for send in sends.values where send.end < cutoff { candidates[send.id] = send }
        guard !candidates.isEmpty else { return [] }
        // Content ids are indexed only when a push names content alone (rare: a healthy run's
        // pushes name their send), so a fold does not rebuild an index of every held send's id.
        func isContent(_ attribution: Attribution?) -> Bool { if case .content = attribution { true } else { false } }
        // Pushes the push service took before the cutoff and no device received (yet).
        let unreceived = trailRecords(handedBefore: cutoff)
        let byContent =
            receipts.contains { isContent($0.attribution) } || rejections.contains { isContent($0.attribution) }
            || unreceived.contains { isContent($0.record.attribution) } || trail.hubNotes.contains { isContent($0.attribution) }
        let owners = byContent ? contentOwners() : [:]
        func named(_ attribution: Attribution) -> Int? {
            switch attribution {
            case .send(let id): id
            case .content(let content): owners[content]
            case .otherRun, .unattributable, .undecryptable: nil
            }
        }
        // Who received each candidate in time to count.
        var received: [Int: Set<Int>] = [:]
        for receipt in receipts {
            guard let id = named(receipt.attribution), let send = candidates[id] else { continue }
            if receipt.time >= send.start && receipt.time <= send.end + horizon { received[id, default: []].insert(receipt.device) }
        }
        var spoiled = Set<Int>()
        for rejection in rejections { if let id = named(rejection.attribution) { spoiled.insert(id) } }
        // A push of the send the push service took and the device never received.
        for (_, record) in unreceived { if let attribution = record.attribution, let id = named(attribution) { spoiled.insert(id) } }
        var clean: [Int] = []
        for (id, send) in candidates where !spoiled.contains(id) && everyExpectedReceived(send, received[id] ?? []) { clean.append(id) }
        guard !clean.isEmpty else { return [] }
        clean.sort()
        let folding = Set(clean)
        var part = DeliveryLedger(fleetOf: self)
        part.trail.view = trail.view
        part.trail.viaHub = trail.viaHub
        for id in clean { part.sends[id] = candidates[id] }
        // In place: a new array of every held receipt at each fold would churn the allocator.
        receipts.removeAll { receipt in
            guard let id = named(receipt.attribution), folding.contains(id) else { return false }
            part.receipts.append(receipt)
            return true
        }
        let sparse = DeliveryJudge.judgeSparse(part, deadline: deadline, incidentLimit: incidentLimit)
        var judged = sparse.verdict
        let deliveries = judged.deliveries
        judged.deliveries = []
        var merged = folds.verdict.map { $0.adding(judged, incidentLimit: incidentLimit) } ?? judged
        if merged.byUser.isEmpty { merged.byUser = Array(repeating: Counts(), count: devicesOfUser.count) }
        for (user, counts) in sparse.byUser { merged.byUser[user] = merged.byUser[user] + counts }
        // Only the sends the kept incidents name, however many folds there were.
        var incidentSends = [Int: Send]()
        for incident in merged.incidents {
            if let id = incident.send, let send = folds.incidentSends[id] ?? candidates[id] { incidentSends[id] = send }
        }
        folds.incidentSends = incidentSends
        folds.verdict = merged
        folds.sends += clean.count
        folds.deliveries += deliveries.count
        sends.fold(clean)
        trail.hubNotes.removeAll { note in named(note.attribution).map(folding.contains) ?? false }
        if awaiting.owners != nil {
            for receipt in part.receipts { if let content = receipt.contentID { awaiting.owners?[content] = nil } }
            for id in clean { if let content = candidates[id]?.contentID { awaiting.owners?[content] = nil } }
        }
        return deliveries
    }

    /// Whether every pair `send` expected is among `received`: then nothing but its own receipts
    /// decides it. A lost pair is explained by evidence about its device (unreadable pushes,
    /// reports matched by token), which other sends share.
    private func everyExpectedReceived(_ send: Send, _ received: Set<Int>) -> Bool {
        devicesOfUser[send.to].allSatisfy { device in
            received.contains(device) || !expects(send, device)
        }
    }

    /// The folded verdict added to the rest's, or the rest's alone.
    func withFolds(_ rest: Verdict, incidentLimit: Int) -> Verdict {
        guard let folded = folds.verdict else { return rest }
        var verdict = folded.adding(rest, incidentLimit: incidentLimit)
        verdict.deliveries = rest.deliveries
        verdict.foldedDeliveries = folds.deliveries
        verdict.pushServiceView = rest.pushServiceView
        return verdict
    }
}

extension DeliveryLedger.Verdict {
    /// Two verdicts of disjoint sends added: counts, funnels and explanations summed, incidents
    /// kept up to the limit per outcome (this one's first), deliveries joined.
    func adding(_ other: Self, incidentLimit: Int) -> Self {
        var sum = self
        sum.total = total + other.total
        for (user, counts) in other.byUser.enumerated() where user < sum.byUser.count { sum.byUser[user] = sum.byUser[user] + counts }
        for (platform, counts) in other.byPlatform { sum.byPlatform[platform] = (sum.byPlatform[platform] ?? .init()) + counts }
        sum.deliveries += other.deliveries
        sum.misdeliveredAt += other.misdeliveredAt
        var kept: [DeliveryLedger.Outcome: Int] = [:]
        for incident in incidents { kept[incident.outcome, default: 0] += 1 }
        for incident in other.incidents where kept[incident.outcome, default: 0] < incidentLimit {
            kept[incident.outcome, default: 0] += 1
            sum.incidents.append(incident)
        }
        sum.incidents.sort { ($0.time ?? .max, $0.send ?? 0, $0.device ?? 0) < ($1.time ?? .max, $1.send ?? 0, $1.device ?? 0) }
        for (outcome, count) in other.incidentTotals { sum.incidentTotals[outcome, default: 0] += count }
        for (explanation, count) in other.explanations { sum.explanations[explanation, default: 0] += count }
        for (platform, funnel) in other.funnel { sum.funnel[platform] = (sum.funnel[platform] ?? .init()) + funnel }
        return sum
    }
}

extension DeliveryLedger.Funnel {
    static func + (a: Self, b: Self) -> Self {
        var sum = a
        sum.sends += b.sends
        sum.sendsAccepted += b.sendsAccepted
        sum.expected += b.expected
        func add(_ x: Int?, _ y: Int?) -> Int? { x == nil && y == nil ? nil : (x ?? 0) + (y ?? 0) }
        sum.handed = add(a.handed, b.handed)
        sum.accepted = add(a.accepted, b.accepted)
        sum.written = add(a.written, b.written)
        sum.received += b.received
        sum.inHand += b.inHand
        return sum
    }
}
