import PropertyBased
import PushFleetCore
import PushFleetLedger
import Testing

/// The ledger against a small model written apart from it: random timelines of registrations,
/// sends, receipts, refusals and probes, where the model knows by construction what each event
/// is (the ledger only sees what a device could see).
@Suite("Delivery ledger properties")
struct LedgerPropertyTests {
    /// A generated timeline and the counts its construction implies.
    struct Timeline: CustomStringConvertible {
        var ledger: DeliveryLedger
        var truth: DeliveryLedger.Counts
        var description: String { "truth \(truth)" }
    }

    /// Builds a timeline from a seed. Every send is at least 1 s after the previous one and each
    /// event sits inside its send's second, so the model can judge each one on its own.
    static func timeline(seed: UInt64) -> Timeline {
        var rng = SplitMix64(seed: seed)
        func chance(_ p: Double) -> Bool { rng.nextUnit() < p }
        func pick(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let ms: Int64 = 1_000_000
        let users = 2 + pick(3)
        var ledger = DeliveryLedger(users: users)
        var truth = DeliveryLedger.Counts()
        let platforms = Scenario.PlatformName.allCases
        var devices: [(user: Int, platform: Scenario.PlatformName)] = []
        for user in 0..<users {
            for _ in 0..<(1 + pick(3)) {
                let platform = platforms[pick(3)]
                _ = ledger.addDevice(.init(user: user, platform: platform))
                devices.append((user, platform))
            }
        }
        // Each device: registered at 0 or never; a dead token from some send on.
        var registered = devices.map { _ in chance(0.85) }
        var dead = devices.map { _ in Int?.none }
        for index in devices.indices where registered[index] {
            ledger.setEligible(index, true, at: 0)
            if chance(0.2) { dead[index] = 1 + pick(8) }
        }
        var knownDead = devices.map { _ in false }
        // When the backend was told of the current dead period (the first refused push it can
        // place), and whether a re-registration started a new period that no send has told yet.
        var toldAt = devices.map { _ in Int64?.none }
        var untold = devices.map { _ in false }
        // Failed fetches of ids the send's answer did not name: judged once every fetch is in.
        var untied: [(send: Int, lostIfUntied: Bool)] = []
        let sends = 4 + pick(8)
        for id in 1...sends {
            let base = Int64(id) * 1000 * ms
            let to = pick(users)
            let kind: Scenario.Traffic.Kind = chance(0.5) ? .plain : .secure
            let targeted = kind == .plain ? [platforms[pick(3)]] : platforms
            let succeeded = chance(0.95)
            // A registration that changes while the send is open makes its pairs indeterminate.
            var churned = Set<Int>()
            for device in devices.indices where devices[device].user == to && registered[device] && dead[device].map({ id < $0 }) ?? true && chance(0.05) {
                ledger.setEligible(device, false, at: base + 2 * ms, since: base + 1 * ms)
                ledger.setEligible(device, true, at: base + 4 * ms, since: base + 3 * ms)
                churned.insert(device)
            }
            let contentID = kind == .secure ? "n\(id)" : nil
            let answerKnown = chance(0.5)
            let send = DeliveryLedger.Send(
                id: id, from: pick(users), to: to, kind: kind, platforms: targeted, intended: base - ms, start: base, end: base + 10 * ms,
                succeeded: succeeded, contentID: answerKnown ? contentID : nil
            )
            var eventTime = base + 20 * ms
            func next() -> Int64 {
                eventTime += ms
                return eventTime
            }
            for device in devices.indices where devices[device].user == to && targeted.contains(devices[device].platform) {
                let isDead = dead[device].map { id >= $0 } ?? false
                // A failed send or a registration change inside the send's window: judged neither way.
                let unsure = !succeeded || churned.contains(device)
                if isDead && succeeded {
                    if knownDead[device] && !churned.contains(device) && chance(0.15) {
                        // The app registers its dead token again while the send is open: the
                        // backend may take it for live, so its refusals start a new period.
                        ledger.setEligible(device, true, at: base + 4 * ms, since: base + 3 * ms)
                        ledger.record(DeliveryLedger.Rejection(device: device, refused: .send(id), at: next()))
                        truth.unregistered += 1
                        untold[device] = true
                    } else if !knownDead[device] || untold[device] {
                        // The first push to the dead token: refused, and the backend could not know.
                        let time = next()
                        ledger.record(DeliveryLedger.Rejection(device: device, refused: .send(id), at: time))
                        truth.unregistered += 1
                        if !unsure && !knownDead[device] { truth.expected += 1 }
                        knownDead[device] = true
                        untold[device] = false
                        toldAt[device] = max(send.end, time)
                    } else if chance(0.3) {
                        // A refused push that names nothing: counted against the backend only when
                        // it arrived a deadline (5 s) after the backend was told.
                        let time = next()
                        ledger.record(DeliveryLedger.Rejection(device: device, refused: .unattributable, at: time))
                        if let told = toldAt[device], told < time - 5000 * ms { truth.sentToDeadToken += 1 } else { truth.unregistered += 1 }
                    } else if chance(0.5) {
                        // The backend was told and pushes anyway.
                        ledger.record(DeliveryLedger.Rejection(device: device, refused: .send(id), at: next()))
                        truth.sentToDeadToken += 1
                    }
                    continue
                }
                if unsure {
                    // A failed send whose push arrived anyway is recovered; otherwise nobody can tell.
                    if registered[device] && chance(0.5) {
                        ledger.record(DeliveryLedger.Receipt(device: device, attribution: .send(id), time: next()))
                        if succeeded { truth.indeterminate += 1 } else { truth.recovered += 1 }
                    } else {
                        truth.indeterminate += 1
                    }
                    continue
                }
                guard registered[device] else {
                    // Not registered, so not expected: a push to it anyway is misdelivered.
                    if chance(0.1) {
                        ledger.record(DeliveryLedger.Receipt(device: device, attribution: .send(id), time: next()))
                        truth.misdelivered += 1
                    }
                    continue
                }
                truth.expected += 1
                let roll = rng.nextUnit()
                if roll < 0.1 {
                    truth.lost += 1
                } else if roll < 0.2, let contentID {
                    // The fetch failed: received, not checked. When nothing ties the id to this
                    // send, the pair is not settled either: also lost.
                    ledger.record(.init(device: device, attribution: .content(contentID), time: next(), content: .failed(reason: "status_500")))
                    truth.unverified += 1
                    if !answerKnown { untied.append((id, lostIfUntied: true)) }
                } else {
                    let late = chance(0.1)
                    let time = late ? base + 6000 * ms : next()
                    if kind == .secure {
                        ledger.record(.init(device: device, attribution: .send(id), time: time, content: .fetched(at: time + ms), contentID: contentID))
                    } else {
                        ledger.record(.init(device: device, attribution: .send(id), time: time))
                    }
                    if late { truth.late += 1 } else { truth.delivered += 1 }
                    if chance(0.1) {
                        ledger.record(.init(device: device, attribution: .send(id), time: time + 2 * ms))
                        truth.duplicates += 1
                    }
                }
            }
            // Misdeliveries: a device of another user gets the push; a read of it that works is a leak.
            if succeeded && chance(0.3), let other = devices.indices.filter({ devices[$0].user != to }).randomElement(using: &rng) {
                if let contentID {
                    if chance(0.3) {
                        ledger.record(.init(device: other, attribution: .send(id), time: next(), content: .fetched(at: eventTime + 1)))
                        truth.misdelivered += 1
                        truth.leaks += 1
                    } else {
                        // Refused: still a misdelivery when the id is known to be this send's.
                        ledger.record(.init(device: other, attribution: .content(contentID), time: next(), content: .failed(reason: "status_403")))
                        if answerKnown { truth.misdelivered += 1 } else { untied.append((id, lostIfUntied: false)) }
                    }
                } else {
                    ledger.record(.init(device: other, attribution: .send(id), time: next()))
                    truth.misdelivered += 1
                }
            }
            if chance(0.1), let any = devices.indices.randomElement(using: &rng) {
                ledger.record(.init(device: any, attribution: .otherRun, time: next()))
                truth.stale += 1
            }
            if chance(0.05), let any = devices.indices.randomElement(using: &rng) {
                // A push naming this send that arrived before the send started: a replay.
                ledger.record(.init(device: any, attribution: .send(id), time: base - 5 * ms))
                truth.stale += 1
            }
            if chance(0.05), let any = devices.indices.randomElement(using: &rng) {
                ledger.record(.init(device: any, attribution: .unattributable, time: next()))
                truth.misdelivered += 1
            }
            if chance(0.05), let any = devices.indices.randomElement(using: &rng) {
                ledger.record(DeliveryLedger.ProbeLeak(device: any, time: next(), detail: "probe"))
                truth.leaks += 1
            }
            ledger.record(send)
            // A dead token's declaration ends its device's registration for later sends.
            for device in devices.indices where knownDead[device] { registered[device] = false }
        }
        for (send, lostIfUntied) in untied {
            let tied = someoneFetched(send, in: ledger)
            if lostIfUntied {
                if !tied { truth.lost += 1 }
            } else if tied {
                truth.misdelivered += 1
            } else {
                truth.unverified += 1
            }
        }
        return Timeline(ledger: ledger, truth: truth)
    }

    /// Whether some device fetched send `id`'s content and so taught the ledger its id.
    static func someoneFetched(_ id: Int, in ledger: DeliveryLedger) -> Bool {
        ledger.receipts.contains { receipt in
            if case .send(id) = receipt.attribution, case .fetched = receipt.content, receipt.contentID != nil { return true }
            return false
        }
    }

    @Test("the verdict equals the model's counts on random timelines")
    func matchesModel() async {
        await propertyCheck(count: 1000, input: Gen.uint64()) { seed in
            let timeline = Self.timeline(seed: seed)
            let verdict = timeline.ledger.verdict(deadline: .seconds(5))
            #expect(verdict.total == timeline.truth, "seed \(seed)")
            // The per-user and per-platform rows add up to the totals.
            #expect(verdict.byUser.reduce(DeliveryLedger.Counts(), +) == verdict.total)
            #expect(verdict.byPlatform.values.reduce(DeliveryLedger.Counts(), +) == verdict.total)
            // Every incident kind is counted as often as its outcome.
            let totals = verdict.incidentTotals
            #expect((totals[.misdelivered] ?? 0) == verdict.total.misdelivered)
            #expect((totals[.lost] ?? 0) == verdict.total.lost)
            #expect((totals[.stale] ?? 0) == verdict.total.stale)
            #expect((totals[.sentToDeadToken] ?? 0) == verdict.total.sentToDeadToken)
        }
    }
}

@Suite("Nonces and names on the wire")
struct WireTextTests {
    @Test("a nonce names this run's send only with this run's id; other runs and the old format are another run")
    func nonces() {
        let run = "80224c573078"
        #expect(PushContent.nonce(in: "From user2: pf:80224c573078:17", run: run) == .this(17))
        #expect(PushContent.nonce(in: "pf:123456789012:5", run: "123456789012") == .this(5))
        #expect(PushContent.nonce(in: "From user2: pf:00000000aaaa:17", run: run) == .otherRun)
        #expect(PushContent.nonce(in: "From user2: pf:17", run: run) == .otherRun)
        #expect(PushContent.nonce(in: "hello", run: run) == nil)
        #expect(PushContent.nonce(in: "pf:zz", run: run) == nil)
        #expect(PushContent.parseSecurePayload("pf:80224c573078:9:ann:x", run: run).map { "\($0.nonce) \($0.recipient)" } == "this(9) ann:x")
        #expect(PushContent.parseSecurePayload("pf:9:ann", run: run) == nil)
    }

    @Test("user names are data in a query: reserved characters are escaped")
    func queryValues() {
        #expect(PercentEncoding.component("user17") == "user17")
        #expect(PercentEncoding.component("bob&x=1") == "bob%26x%3D1")
        #expect(PercentEncoding.component("ann b#") == "ann%20b%23")
        #expect(PercentEncoding.component("zoë") == "zo%C3%AB")
    }
}
