import PropertyBased
import PushFleetCore
import PushFleetLedger
import Testing

/// Folding (judging settled sends during the run and letting them go) against judging the same
/// material at the end: random timelines whose events come in time order, as a run records them,
/// with pushes in time, late, past the horizon, twice, to the wrong device, refused, unreadable.
@Suite("Delivery ledger folding")
struct LedgerFoldTests {
    static let ms: Int64 = 1_000_000
    static let deadline = Duration.seconds(1)
    static let horizon = Duration.seconds(3)

    /// One recorded event at its instant on the run's clock.
    struct Event {
        var time: Int64
        var apply: (inout DeliveryLedger) -> Void
    }

    struct Timeline {
        var users: Int
        var devices: [DeliveryLedger.Device]
        var events: [Event]
        var watched: Bool
    }

    static func timeline(seed: UInt64) -> Timeline {
        var rng = SplitMix64(seed: seed)
        func chance(_ p: Double) -> Bool { rng.nextUnit() < p }
        func pick(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        func between(_ low: Int64, _ high: Int64) -> Int64 { low + Int64(rng.next() % UInt64(high - low + 1)) }
        let users = 2 + pick(4)
        let platforms = Scenario.PlatformName.allCases
        var devices: [DeliveryLedger.Device] = []
        for user in 0..<users {
            for _ in 0..<(1 + pick(3)) { devices.append(.init(user: user, platform: platforms[pick(platforms.count)])) }
        }
        var events: [Event] = []
        for device in devices.indices where chance(0.9) {
            events.append(Event(time: 0) { $0.setEligible(device, true, at: 0) })
        }
        var time: Int64 = 50 * ms
        for id in 1...(20 + pick(40)) {
            time += between(50 * ms, 400 * ms)
            let start = time
            let end = start + between(2 * ms, 60 * ms)
            let to = pick(users)
            let kind: Scenario.Traffic.Kind = chance(0.5) ? .plain : .secure
            let targeted = kind == .plain ? [platforms[pick(platforms.count)]] : platforms
            let contentID = kind == .secure ? "c\(seed % 997)-\(id)" : nil
            let send = DeliveryLedger.Send(
                id: id, from: pick(users), to: to, kind: kind, platforms: targeted, intended: start - between(0, 20 * ms), start: start, end: end,
                succeeded: chance(0.93), contentID: chance(0.7) ? contentID : nil
            )
            events.append(Event(time: end) { $0.record(send) })
            func receipt(_ device: Int, at time: Int64, failed: Bool = false, byContent: Bool = false, path: Bool = false) {
                let attribution: DeliveryLedger.Attribution = byContent && contentID != nil ? .content(contentID!) : .send(id)
                let content: DeliveryLedger.ContentCheck =
                    kind == .plain ? .none : failed ? .failed(reason: "status_500") : .fetched(at: time + between(1 * ms, 30 * ms))
                let pushPath = path ? DeliveryLedger.PushPath(acceptedAt: time - 5 * ms, writtenAt: time - 1 * ms, receivedAt: time) : nil
                let value = DeliveryLedger.Receipt(
                    device: device, attribution: attribution, time: time, content: content,
                    contentID: kind == .secure && !failed ? contentID : nil, path: pushPath
                )
                events.append(Event(time: time) { $0.record(value) })
            }
            for device in devices.indices where devices[device].user == to && targeted.contains(devices[device].platform) {
                let path = chance(0.5)
                let roll = rng.nextUnit()
                if roll < 0.55 {
                    receipt(device, at: start + between(1 * ms, 900 * ms), path: path)
                } else if roll < 0.62 {
                    receipt(device, at: start + between(1_100 * ms, 2_500 * ms), path: path)
                } else if roll < 0.67 {
                    // Past the horizon: never credited.
                    receipt(device, at: end + between(3_100 * ms, 5_000 * ms))
                } else if roll < 0.72 {
                    let first = start + between(1 * ms, 900 * ms)
                    receipt(device, at: first)
                    receipt(device, at: first + between(1 * ms, 2_000 * ms))
                } else if roll < 0.77 {
                    receipt(device, at: start + between(1 * ms, 900 * ms), failed: true, byContent: true)
                } else if roll < 0.82 {
                    receipt(device, at: start + between(1 * ms, 900 * ms), byContent: true)
                } else if roll < 0.85 {
                    // The push beats the backend's answer.
                    receipt(device, at: start + between(0, end - start))
                } else if roll < 0.88 {
                    let at = start + between(1 * ms, 900 * ms)
                    let rejection = DeliveryLedger.Rejection(device: device, refused: .send(id), at: at)
                    events.append(Event(time: at) { $0.record(rejection) })
                } else if roll < 0.91 {
                    // The registration changes while the send is open.
                    let since = start + between(0, end - start)
                    events.append(Event(time: since + 1 * ms) { $0.setEligible(device, false, at: since + 1 * ms, since: since) })
                    events.append(Event(time: end + 5 * ms) { $0.setEligible(device, true, at: end + 5 * ms, since: end + 2 * ms) })
                    if chance(0.5) { receipt(device, at: start + between(1 * ms, 900 * ms)) }
                } else if roll < 0.93 {
                    receipt(device, at: start - between(1 * ms, 40 * ms))
                }
                // else: lost.
            }
            if chance(0.08), let other = devices.indices.filter({ devices[$0].user != to }).randomElement(using: &rng) {
                receipt(other, at: start + between(1 * ms, 900 * ms))
            }
            if chance(0.04), let any = devices.indices.randomElement(using: &rng) {
                let at = start + between(1 * ms, 900 * ms)
                let attribution: DeliveryLedger.Attribution = [.otherRun, .unattributable, .undecryptable][pick(3)]
                events.append(Event(time: at) { $0.record(DeliveryLedger.Receipt(device: any, attribution: attribution, time: at)) })
            }
            if chance(0.02), let any = devices.indices.randomElement(using: &rng) {
                let at = start + between(1 * ms, 900 * ms)
                events.append(Event(time: at) { $0.record(DeliveryLedger.ProbeLeak(device: any, time: at, detail: "probe")) })
            }
        }
        // Stable: events at one instant keep the order they were made in.
        let ordered = events.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
        return Timeline(users: users, devices: devices, events: ordered, watched: chance(0.5))
    }

    static func ledger(_ timeline: Timeline) -> DeliveryLedger {
        var ledger = DeliveryLedger(users: timeline.users)
        for device in timeline.devices { _ = ledger.addDevice(device) }
        ledger.horizon = horizon
        if timeline.watched { ledger.setPushServiceView(.watched(since: 0, gaps: [])) }
        return ledger
    }

    /// A ledger with the horizon and these devices, each registered from instant 0.
    static func registered(_ devices: [(user: Int, platform: Scenario.PlatformName)]) -> DeliveryLedger {
        var ledger = DeliveryLedger(users: (devices.map(\.user).max() ?? 0) + 1)
        ledger.horizon = horizon
        for device in devices { ledger.setEligible(ledger.addDevice(.init(user: device.user, platform: device.platform)), true, at: 0) }
        return ledger
    }

    static func key(_ delivery: DeliveryLedger.Delivery) -> String {
        "\(delivery.send)/\(delivery.device)/\(delivery.raw)/\(delivery.corrected)/\(delivery.endToEndRaw ?? -1)/\(delivery.late)/\(delivery.hops?.device ?? -1)"
    }

    @Test("folding as the run goes judges exactly as judging everything at the end")
    func foldEqualsBatch() async {
        await propertyCheck(count: 300, input: Gen.uint64()) { seed in Self.check(seed) }
    }

    static func check(_ seed: UInt64) {
            let timeline = Self.timeline(seed: seed)
            var whole = Self.ledger(timeline)
            var folding = Self.ledger(timeline)
            var folded: [DeliveryLedger.Delivery] = []
            for event in timeline.events {
                event.apply(&whole)
                folded += folding.fold(now: event.time, deadline: Self.deadline, incidentLimit: 10_000)
                event.apply(&folding)
            }
            let end = (timeline.events.last?.time ?? 0) + 10_000 * Self.ms
            folded += folding.fold(now: end, deadline: Self.deadline, incidentLimit: 10_000)
            let batch = whole.verdict(deadline: Self.deadline, incidentLimit: 10_000)
            let streamed = folding.verdict(deadline: Self.deadline, incidentLimit: 10_000)
            #expect(folding.foldedSends > 0, "seed \(seed): nothing was folded")
            #expect(streamed.total == batch.total, "seed \(seed)")
            #expect(streamed.byUser == batch.byUser, "seed \(seed)")
            #expect(streamed.byPlatform == batch.byPlatform, "seed \(seed)")
            #expect(streamed.incidentTotals == batch.incidentTotals, "seed \(seed)")
            #expect(streamed.explanations == batch.explanations, "seed \(seed)")
            #expect(streamed.funnel == batch.funnel, "seed \(seed)")
            #expect(streamed.misdeliveredAt.sorted() == batch.misdeliveredAt.sorted(), "seed \(seed)")
            #expect(streamed.foldedDeliveries == folded.count, "seed \(seed)")
            #expect((streamed.deliveries + folded).map(Self.key).sorted() == batch.deliveries.map(Self.key).sorted(), "seed \(seed)")
            let incidents = { (verdict: DeliveryLedger.Verdict) in
                verdict.incidents.map { "\($0.outcome) \($0.send ?? -1) \($0.device ?? -1) \($0.time ?? -1) \($0.detail)" }.sorted()
            }
            #expect(incidents(streamed) == incidents(batch), "seed \(seed)")
            #expect(folding.sendsRecorded == whole.sendsRecorded, "seed \(seed)")
            // What is still held is only what folding could not settle.
            #expect(folding.sends.count + folding.foldedSends == whole.sends.count, "seed \(seed)")
            #expect(folding.receipts.count < whole.receipts.count, "seed \(seed)")
    }

    @Test("a push past the horizon is stale and its pair lost, whether or not its send was folded")
    func pastHorizon() {
        for fold in [false, true] {
            var ledger = Self.registered([(0, .apns), (0, .fcm)])
            let ms = Self.ms
            ledger.record(.init(id: 1, from: 0, to: 0, kind: .plain, platforms: [.apns, .fcm], intended: 10 * ms, start: 10 * ms, end: 20 * ms, succeeded: true))
            ledger.record(.init(device: 0, attribution: .send(1), time: 200 * ms))
            ledger.record(.init(device: 1, attribution: .send(1), time: 400 * ms))
            if fold { #expect(ledger.fold(now: 4_000 * ms, deadline: Self.deadline, incidentLimit: 10).count == 2) }
            #expect(ledger.foldedSends == (fold ? 1 : 0))
            // Both again, past the horizon (3 s after the answer at 20 ms).
            ledger.record(.init(device: 0, attribution: .send(1), time: 3_100 * ms))
            ledger.record(.init(device: 1, attribution: .send(1), time: 3_200 * ms))
            let verdict = ledger.verdict(deadline: Self.deadline)
            #expect(verdict.total.delivered == 2)
            #expect(verdict.total.stale == 2)
            #expect(verdict.total.duplicates == 0)
            #expect(verdict.incidents.filter { $0.outcome == .stale }.allSatisfy { $0.detail.contains("horizon") })
        }
        // Without another receipt, a pair whose only push came past the horizon is lost.
        var ledger = Self.registered([(0, .apns)])
        ledger.record(.init(id: 1, from: 0, to: 0, kind: .plain, platforms: [.apns], intended: 10 * Self.ms, start: 10 * Self.ms, end: 11 * Self.ms, succeeded: true))
        ledger.record(.init(device: 0, attribution: .send(1), time: 3_012 * Self.ms))
        let verdict = ledger.verdict(deadline: Self.deadline)
        #expect(verdict.total.lost == 1)
        #expect(verdict.total.stale == 1)
        #expect(verdict.total.late == 0)
    }

    @Test("a send with a lost pair or a refusal is kept for the end, with its evidence; duplicates and misdeliveries fold")
    func unsettledKept() {
        var ledger = Self.registered([(0, .apns), (1, .apns)])
        let ms = Self.ms
        for id in 1...5 {
            let start = Int64(id) * 100 * ms
            ledger.record(.init(id: id, from: 1, to: 0, kind: .plain, platforms: [.apns], intended: start, start: start, end: start + ms, succeeded: true))
        }
        ledger.record(.init(device: 0, attribution: .send(1), time: 150 * ms))
        // 2 lost; 3 twice; 4 also to user 1's device.
        ledger.record(.init(device: 0, attribution: .send(3), time: 350 * ms))
        ledger.record(.init(device: 0, attribution: .send(3), time: 360 * ms))
        ledger.record(.init(device: 0, attribution: .send(4), time: 450 * ms))
        ledger.record(.init(device: 1, attribution: .send(4), time: 460 * ms))
        // 5 refused as a dead token: what the backend knew is judged over every send.
        ledger.record(DeliveryLedger.Rejection(device: 0, refused: .send(5), at: 550 * ms))
        let folded = ledger.fold(now: 10_000 * ms, deadline: Self.deadline, incidentLimit: 10)
        #expect(folded.map(\.send).sorted() == [1, 3, 4])
        #expect(ledger.foldedSends == 3)
        #expect([1, 3, 4].allSatisfy { ledger.sends[$0] == nil && ledger.sends.isFolded($0) })
        #expect([2, 5].allSatisfy { ledger.sends[$0] != nil && !ledger.sends.isFolded($0) })
        #expect(ledger.receipts.isEmpty)
        let verdict = ledger.verdict(deadline: Self.deadline)
        #expect(verdict.total.delivered == 3)
        #expect(verdict.total.lost == 1)
        #expect(verdict.total.duplicates == 1)
        #expect(verdict.total.misdelivered == 1)
        #expect(verdict.total.unregistered == 1)
        #expect(verdict.incidents.contains { $0.outcome == .misdelivered && $0.send == 4 })
        #expect(ledger.knownSend(4)?.to == 0)
        #expect(ledger.sendsRecorded == 5)
    }
}

