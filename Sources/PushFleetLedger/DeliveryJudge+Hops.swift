import PushFleetCore

/// The judge's explanations: where each lost, late and unverified pair went wrong, from the push
/// service's reports (``DeliveryLedger/PushTrail``) and the paths receipts carry, and each
/// platform's funnel. Only what was seen is said: with a push service that is not pushfleet's, or
/// a gap in its reports over a pair's time, the hop is `unknown`.
extension DeliveryJudge {
    struct TrailIndex {
        /// The push service saw the run's pushes; its reports may have gaps.
        var watched = false
        var gaps: [Range<Int64>] = []
        /// Why it was not watched.
        var unwatchedReason = ""
        /// The furthest report of each pair's push.
        var byPair: [Pair: Ledger.PushRecord] = [:]
        /// Reports of pushes to a device's token that name no send the run knows (content whose id
        /// no answer or fetch gave), earliest first, each used once.
        var unplaced: [Int: [(record: Ledger.PushRecord, used: Bool)]] = [:]
        /// The first token that is no device's a send was pushed to.
        var otherTokens: [Int: String] = [:]
        /// Sends a hub took, and whether the run's pushes went through a hub at all.
        var hubSends = Set<Int>()
        var hubInPath = false
    }

    /// Places every report the ledger kept by (send, device): its token says the device, what it
    /// carried says the send.
    mutating func placeTrail() {
        verdict.pushServiceView = ledger.trail.view
        switch ledger.trail.view {
        case .unknown(let reason):
            trail.unwatchedReason = reason
        case .watched(let since, let gaps):
            trail.watched = true
            // Before the watch began nothing was seen.
            trail.gaps = [Int64.min..<since] + gaps
        }
        let records = ledger.trailRecords()
        // Only the tokens reports name are looked up: a healthy run indexes none.
        let named = Set(records.map(\.record.token))
        var devices: [String: Int] = [:]
        if !named.isEmpty {
            for (index, device) in ledger.devices.enumerated() {
                if let token = device.token, named.contains(token) { devices[token] = index }
            }
        }
        trail.hubInPath = ledger.trail.viaHub || !ledger.trail.hubNotes.isEmpty
        for (_, record) in records {
            var send: Int?
            if let attribution = record.attribution {
                switch resolve(attribution, at: record.handedAt) {
                case .send(let found): send = found.id
                // Still its send's, however late; a folded send's explains nothing else.
                case .pastHorizon(let id):
                    guard ledger.sends[id] != nil else { continue }
                    send = id
                case .otherRun, .unknown: break
                }
            }
            guard let device = devices[record.token] else {
                if let send, trail.otherTokens[send] == nil { trail.otherTokens[send] = record.token }
                continue
            }
            if let send {
                let pair = Pair(send: send, device: device)
                if let kept = trail.byPair[pair], Self.rank(kept.step) >= Self.rank(record.step) { continue }
                trail.byPair[pair] = record
            } else if record.attribution != .otherRun {
                trail.unplaced[device, default: []].append((record, false))
            }
        }
        for device in trail.unplaced.keys { trail.unplaced[device]!.sort { $0.record.handedAt < $1.record.handedAt } }
        for note in ledger.trail.hubNotes {
            switch resolve(note.attribution, at: note.at) {
            case .send(let send): trail.hubSends.insert(send.id)
            case .pastHorizon(let id): trail.hubSends.insert(id)
            case .otherRun, .unknown: break
            }
        }
    }

    /// How far a report's push got: a refusal least, a write to the device most.
    static func rank(_ step: PushHop.Step) -> Int {
        switch step {
        case .refused: 0
        case .dropped, .holdFull, .notStored, .expired, .replaced, .unregistered, .disconnected, .discarded: 1
        case .held: 2
        case .accepted, .delayed: 3
        case .written: 4
        }
    }

    // MARK: Explanations

    /// Where an expected pair that nothing settled was lost.
    /// Why a pair was lost, and the push service's part of its push when it reported one.
    mutating func explainLost(_ pair: Pair) -> (Ledger.Explanation, Ledger.PushPart?) {
        let device = pair.device
        guard trail.watched, let send = ledger.sends[pair.send] else {
            return (explain(.lost, device: device, hop: .unknown, cause: .unwatched, reason: trail.unwatchedReason), nil)
        }
        if let record = trail.byPair[pair] { return (explain(lostAt: record, device: device, byToken: false), record.part) }
        let span = send.start..<max(send.start, send.end) + deadline
        // A browser that could not decrypt a push in the send's span: no service could read it
        // either, so that push is taken to be this send's.
        if let index = undecryptable[device]?.firstIndex(where: { !$0.used && $0.time >= send.start && $0.time < span.upperBound }) {
            undecryptable[device]![index].used = true
            reached(device, .received)
            return (explain(.lost, device: device, hop: .device, cause: .undecryptable), nil)
        }
        if let index = trail.unplaced[device]?.firstIndex(where: { !$0.used && span.contains($0.record.handedAt) }) {
            trail.unplaced[device]![index].used = true
            let record = trail.unplaced[device]![index].record
            return (explain(lostAt: record, device: device, byToken: true), record.part)
        }
        // Absence is evidence only where the reports had no gap.
        if trail.gaps.contains(where: { $0.overlaps(span) }) {
            return (explain(.lost, device: device, hop: .unknown, cause: .unwatched, reason: "the push service's reports had a gap"), nil)
        }
        if let token = trail.otherTokens[send.id] { return (explain(.lost, device: device, hop: .backend, cause: .otherToken, reason: token), nil) }
        if trail.hubInPath {
            return trail.hubSends.contains(send.id)
                ? (explain(.lost, device: device, hop: .hub, cause: .hubSkipped), nil) : (explain(.lost, device: device, hop: .backend, cause: .notToHub), nil)
        }
        return (explain(.lost, device: device, hop: .backend, cause: .notPushed), nil)
    }

    private mutating func explain(lostAt record: Ledger.PushRecord, device: Int, byToken: Bool) -> Ledger.Explanation {
        let cause: Ledger.Cause
        switch record.step {
        case .refused:
            reached(device, .handed)
            return explain(.lost, device: device, hop: .pushService, cause: .refused, status: record.status, reason: record.reason, byToken: byToken)
        case .written:
            reached(device, .written)
            return explain(.lost, device: device, hop: .device, cause: .notReceived, byToken: byToken)
        case .dropped: cause = .dropped
        case .holdFull: cause = .holdFull
        case .notStored: cause = .notStored
        case .expired: cause = .expired
        case .replaced: cause = .replaced
        case .discarded: cause = .discarded
        case .unregistered: cause = .unregistered
        case .disconnected: cause = .disconnected
        case .held: cause = .held
        case .accepted, .delayed: cause = .inFlight
        }
        reached(device, .accepted)
        // Given up as the platform promises: replaced by a newer push, or FCM's discarded hold.
        let promised = cause == .replaced || cause == .discarded
        return explain(promised ? .replaced : .lost, device: device, hop: .pushService, cause: cause, byToken: byToken)
    }

    /// Which hop made a late pair late: the one that took longest.
    func explainLate(_ device: Int, path: Ledger.PushPath?, hops: Ledger.HopTimes?) -> Ledger.Explanation {
        guard let hops, let path else {
            return explain(.late, device: device, hop: .unknown, cause: .unwatched, reason: "the push service gave no path")
        }
        let hop = hops.longest
        var cause = Ledger.Cause.slow
        if hop == .pushService {
            if path.held {
                cause = .heldOffline
            } else if path.delayed {
                cause = .delayed
            }
        }
        return explain(.late, device: device, hop: hop, cause: cause)
    }

    func explain(
        _ outcome: Ledger.Outcome, device: Int, hop: Ledger.Hop, cause: Ledger.Cause, status: Int? = nil, reason: String? = nil, byToken: Bool = false
    ) -> Ledger.Explanation {
        Ledger.Explanation(
            outcome: outcome, hop: hop, cause: cause, platform: ledger.devices[device].platform, status: status, reason: reason, byToken: byToken
        )
    }

    // MARK: The funnel

    /// A judged send, under every platform it targeted.
    mutating func countSend(_ send: Ledger.Send) {
        for platform in Set(send.platforms) {
            update(platform) {
                $0.sends += 1
                if send.succeeded { $0.sendsAccepted += 1 }
            }
        }
    }

    /// How far an expected pair got, in order; each stage implies the ones before it.
    enum Stage: Int, Comparable {
        case expected, handed, accepted, written, received, inHand

        static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    }

    /// An expected pair of `device` got as far as `stage`: `.expected` counts the pair, the
    /// others the stages it passed (the push service's only when it was watched).
    mutating func reached(_ device: Int, _ stage: Stage) {
        let watched = trail.watched
        update(ledger.devices[device].platform) { funnel in
            guard stage > .expected else {
                funnel.expected += 1
                return
            }
            if watched {
                funnel.handed! += 1
                if stage >= .accepted { funnel.accepted! += 1 }
                if stage >= .written { funnel.written! += 1 }
            }
            if stage >= .received { funnel.received += 1 }
            if stage >= .inHand { funnel.inHand += 1 }
        }
    }

    private mutating func update(_ platform: Scenario.PlatformName, _ body: (inout Ledger.Funnel) -> Void) {
        var funnel = verdict.funnel[platform] ?? Ledger.Funnel()
        if trail.watched && funnel.handed == nil {
            funnel.handed = 0
            funnel.accepted = 0
            funnel.written = 0
        }
        body(&funnel)
        verdict.funnel[platform] = funnel
    }
}
