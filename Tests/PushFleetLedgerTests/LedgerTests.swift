import PushFleetCore
import PushFleetLedger
import Testing

/// The ledger's verdict for every outcome class, on hand-built timelines (no I/O).
@Suite("Delivery ledger")
struct LedgerTests {
    static let ms: Int64 = 1_000_000

    /// Two users: alice (apns + fcm), bob (apns); all registered at t = 0.
    func ledger() -> (DeliveryLedger, alicePhone: Int, aliceAndroid: Int, bobPhone: Int) {
        var ledger = DeliveryLedger(users: 2)
        let a1 = ledger.addDevice(.init(user: 0, platform: .apns))
        let a2 = ledger.addDevice(.init(user: 0, platform: .fcm))
        let b1 = ledger.addDevice(.init(user: 1, platform: .apns))
        for device in [a1, a2, b1] { ledger.setEligible(device, true, at: 0) }
        return (ledger, a1, a2, b1)
    }

    func send(_ id: Int, to user: Int, platforms: [Scenario.PlatformName] = [.apns, .fcm], at start: Int64, end: Int64? = nil, ok: Bool = true)
        -> DeliveryLedger.Send
    {
        .init(id: id, from: 1 - user, to: user, kind: .secure, platforms: platforms, intended: start - 2 * Self.ms, start: start,
            end: end ?? start + 5 * Self.ms, succeeded: ok)
    }

    @Test("delivered, late, lost and duplicate, with latencies from actual and intended start")
    func basicOutcomes() {
        var (ledger, a1, a2, _) = ledger()
        ledger.record(send(1, to: 0, at: 100 * Self.ms))
        ledger.record(.init(device: a1, attribution: .send(1), time: 110 * Self.ms, content: .fetched(at: 115 * Self.ms)))
        ledger.record(.init(device: a1, attribution: .send(1), time: 120 * Self.ms))
        ledger.record(.init(device: a2, attribution: .send(1), time: 100 * Self.ms + 6_000 * Self.ms))
        ledger.record(send(2, to: 0, at: 200 * Self.ms))
        let verdict = ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.expected == 4)
        #expect(verdict.total.delivered == 1)
        #expect(verdict.total.late == 1)
        #expect(verdict.total.lost == 2)
        #expect(verdict.total.duplicates == 1)
        #expect(verdict.total.misdelivered == 0)
        let first = verdict.deliveries.first { $0.device == a1 }!
        #expect(first.raw == 10 * Self.ms && first.corrected == 12 * Self.ms)
        #expect(first.endToEndRaw == 15 * Self.ms && first.endToEndCorrected == 17 * Self.ms)
        #expect(verdict.byUser[0].lost == 2 && verdict.byUser[1] == DeliveryLedger.Counts())
        #expect(verdict.byPlatform[.fcm]?.late == 1)
    }

    @Test("a receipt by another user's device, an untargeted platform or an unknown send is misdelivered")
    func misdelivered() {
        var (ledger, a1, a2, b1) = ledger()
        ledger.record(send(1, to: 0, platforms: [.apns], at: 100 * Self.ms))
        ledger.record(.init(device: a1, attribution: .send(1), time: 110 * Self.ms))
        ledger.record(.init(device: b1, attribution: .send(1), time: 111 * Self.ms))
        ledger.record(.init(device: a2, attribution: .send(1), time: 112 * Self.ms))
        ledger.record(.init(device: b1, attribution: .send(99), time: 113 * Self.ms))
        ledger.record(.init(device: b1, attribution: .unattributable, time: 114 * Self.ms))
        let verdict = ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.delivered == 1)
        #expect(verdict.total.misdelivered == 4)
        #expect(verdict.byUser[1].misdelivered == 3 && verdict.byUser[0].misdelivered == 1)
        #expect(verdict.misdeliveredAt.count == 4)
    }

    @Test("devices whose registration changed while the send was open are indeterminate")
    func indeterminate() {
        var (ledger, a1, a2, _) = ledger()
        // a2 re-registers during send 1 (100…105 ms); a1 departs before send 2 starts.
        ledger.setEligible(a2, false, at: 101 * Self.ms)
        ledger.setEligible(a2, true, at: 103 * Self.ms)
        ledger.record(send(1, to: 0, at: 100 * Self.ms))
        ledger.record(.init(device: a1, attribution: .send(1), time: 110 * Self.ms))
        ledger.record(.init(device: a2, attribution: .send(1), time: 110 * Self.ms))
        ledger.setEligible(a1, false, at: 150 * Self.ms)
        ledger.record(send(2, to: 0, at: 200 * Self.ms))
        let verdict = ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.indeterminate == 1)
        #expect(verdict.total.delivered == 1)
        // Send 2: a1 was not eligible (departed) so not expected; a2 expected and lost.
        #expect(verdict.total.expected == 2 && verdict.total.lost == 1)
        #expect(verdict.total.misdelivered == 0)
    }

    @Test("a change whose request overlaps the send is indeterminate, even if it took effect after the send began")
    func changeSpans() {
        var ledger = DeliveryLedger(users: 1)
        let device = ledger.addDevice(.init(user: 0, platform: .apns))
        // The PUT runs 90…130 ms; the send runs 100…105 ms and may or may not find the device.
        ledger.setEligible(device, true, at: 130 * Self.ms, since: 90 * Self.ms)
        ledger.record(send(1, to: 0, platforms: [.apns], at: 100 * Self.ms))
        ledger.record(.init(device: device, attribution: .send(1), time: 110 * Self.ms))
        // A send after the PUT's answer expects the device.
        ledger.record(send(2, to: 0, platforms: [.apns], at: 140 * Self.ms))
        let verdict = ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.indeterminate == 1 && verdict.total.misdelivered == 0)
        #expect(verdict.total.expected == 1 && verdict.total.lost == 1)
    }

    @Test("a failed send expects nobody; its target's device that got the push anyway is recovered, the other indeterminate, others misdelivered")
    func failedSend() {
        var (ledger, a1, _, b1) = ledger()
        ledger.record(send(1, to: 0, at: 100 * Self.ms, ok: false))
        ledger.record(.init(device: a1, attribution: .send(1), time: 110 * Self.ms))
        ledger.record(.init(device: b1, attribution: .send(1), time: 110 * Self.ms))
        let verdict = ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.expected == 0 && verdict.total.lost == 0)
        #expect(verdict.total.recovered == 1 && verdict.total.indeterminate == 1 && verdict.total.misdelivered == 1)
        #expect(verdict.incidents.contains { $0.outcome == .recovered && $0.device == a1 && $0.send == 1 })
    }

    @Test("fetched content of another user is a leak and a misdelivery; probe leaks add up")
    func leaks() {
        var (ledger, a1, _, b1) = ledger()
        ledger.record(send(1, to: 0, at: 100 * Self.ms))
        ledger.record(.init(device: a1, attribution: .send(1), time: 110 * Self.ms, content: .fetched(at: 112 * Self.ms)))
        ledger.record(.init(device: b1, attribution: .send(1), time: 111 * Self.ms, content: .fetched(at: 113 * Self.ms)))
        ledger.record(DeliveryLedger.ProbeLeak(device: a1, time: 120 * Self.ms, detail: "probe"))
        let verdict = ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.leaks == 2)
        #expect(verdict.total.misdelivered == 1)
        #expect(verdict.byUser[1].leaks == 1 && verdict.byUser[0].leaks == 1)
        #expect(verdict.incidents.filter { $0.outcome == .leak }.count == 2)
    }

    @Test("a secure push whose fetch is refused: misdelivered when its id is known to be another user's, unverified otherwise")
    func refusedFetch() {
        var (ledger, a1, a2, b1) = ledger()
        var first = send(1, to: 0, at: 100 * Self.ms)
        first.contentID = "n1"
        ledger.record(first)
        // b1 got alice's id and the backend answered 403: the id's owner is known from the send's answer.
        ledger.record(.init(device: b1, attribution: .content("n1"), time: 110 * Self.ms, content: .failed(reason: "status_403")))
        // a1 is expected but could not fetch: received, not checked.
        ledger.record(.init(device: a1, attribution: .content("n1"), time: 111 * Self.ms, content: .failed(reason: "timeout")))
        // Send 2's id is learnt from a2's successful fetch; b1's failed fetch of it is a misdelivery.
        ledger.record(send(2, to: 0, at: 200 * Self.ms))
        ledger.record(.init(device: a2, attribution: .send(2), time: 210 * Self.ms, content: .fetched(at: 212 * Self.ms), contentID: "n2"))
        ledger.record(.init(device: b1, attribution: .content("n2"), time: 215 * Self.ms, content: .failed(reason: "status_500")))
        // An id nobody can place.
        ledger.record(.init(device: b1, attribution: .content("n9"), time: 216 * Self.ms, content: .failed(reason: "status_404")))
        let verdict = ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.misdelivered == 2)
        #expect(verdict.total.unverified == 2)
        #expect(verdict.total.delivered == 1)
        // Send 1 to a2 and send 2 to a1 never arrived.
        #expect(verdict.total.lost == 2)
        #expect(verdict.byUser[1].misdelivered == 2 && verdict.byUser[1].unverified == 1 && verdict.byUser[0].unverified == 1)
        #expect(verdict.total.leaks == 0)
    }

    @Test("a push from another run, or received before its send started, is stale and never credited")
    func stale() {
        var (ledger, a1, a2, _) = ledger()
        ledger.record(send(1, to: 0, at: 100 * Self.ms))
        ledger.record(.init(device: a1, attribution: .otherRun, time: 110 * Self.ms))
        ledger.record(.init(device: a2, attribution: .send(1), time: 90 * Self.ms))
        let verdict = ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.stale == 2)
        #expect(verdict.total.delivered == 0 && verdict.total.lost == 2 && verdict.total.misdelivered == 0)
    }

    @Test("a token the push service declared dead: not expected afterwards, refusals before the backend knew are unregistered, after it knew sent to a dead token")
    func deadToken() {
        var (ledger, a1, a2, _) = ledger()
        // Send 1 (100…105 ms) meets the refusal at 102 ms: the backend knows from its answer at 105 ms.
        ledger.record(send(1, to: 0, platforms: [.apns], at: 100 * Self.ms))
        ledger.record(DeliveryLedger.Rejection(device: a1, refused: .send(1), at: 102 * Self.ms))
        // Send 2 overlapped send 1 (started at 103 ms, before the answer): not the backend's fault.
        ledger.record(send(2, to: 0, platforms: [.apns], at: 103 * Self.ms))
        ledger.record(DeliveryLedger.Rejection(device: a1, refused: .send(2), at: 104 * Self.ms))
        // Send 3 starts after: the backend should have stopped.
        ledger.record(send(3, to: 0, at: 200 * Self.ms))
        ledger.record(DeliveryLedger.Rejection(device: a1, refused: .send(3), at: 201 * Self.ms))
        ledger.record(.init(device: a2, attribution: .send(3), time: 202 * Self.ms))
        // A backend that honours the feedback sends nothing more: send 4 does not expect a1.
        ledger.record(send(4, to: 0, at: 300 * Self.ms))
        ledger.record(.init(device: a2, attribution: .send(4), time: 302 * Self.ms))
        let verdict = ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.unregistered == 2)
        #expect(verdict.total.sentToDeadToken == 1)
        #expect(verdict.total.lost == 0 && verdict.total.misdelivered == 0)
        #expect(verdict.total.delivered == 2)
        #expect(verdict.incidents.map(\.outcome) == [.sentToDeadToken])
    }

    @Test("incidents are capped per outcome and every one is counted")
    func incidentCap() {
        var (ledger, _, _, b1) = ledger()
        for id in 1...30 {
            ledger.record(send(id, to: 0, at: Int64(id) * 10 * Self.ms))
            ledger.record(.init(device: b1, attribution: .send(id), time: Int64(id) * 10 * Self.ms + 1))
        }
        let verdict = ledger.verdict(deadline: .seconds(5), incidentLimit: 5)
        #expect(verdict.total.misdelivered == 30 && verdict.total.lost == 60)
        #expect(verdict.incidentTotals[.misdelivered] == 30 && verdict.incidentTotals[.lost] == 60)
        #expect(verdict.incidents.filter { $0.outcome == .misdelivered }.count == 5)
        #expect(verdict.incidents.filter { $0.outcome == .lost }.count == 5)
    }

    @Test("open-model schedules put events where the rate says")
    func loadProfile() throws {
        let constant = LoadProfile.constant(Rate(perSecond: 100), for: .seconds(2)).instants()
        #expect(constant.count == 200)
        #expect(constant[0] == 10_000_000 && constant[199] == 2_000_000_000)
        // A ramp 0 → 100/s over 10 s: 500 events, denser at the end.
        let ramp = LoadProfile(stages: [Stage(duration: .seconds(10), target: Rate(perSecond: 100))]).instants()
        #expect(ramp.count == 500)
        let firstHalf = ramp.filter { $0 <= 5_000_000_000 }.count
        #expect(firstHalf == 125)
        #expect(abs(LoadProfile(stages: [Stage(duration: .seconds(10), target: Rate(perSecond: 100))]).expectedCount - 500) < 1e-9)
        #expect(try Rate(parsing: "12000/m") == Rate(perSecond: 200))
    }

    @Test("thresholds parse k6-style expressions and compare in base units")
    func thresholds() throws {
        let p99 = try Threshold(metric: "delivery.latency", expression: "p(99) < 250ms")
        #expect(p99.aggregate == .percentile(99) && p99.bound == 250_000_000)
        #expect(p99.holds(for: 249_000_000) && !p99.holds(for: 250_000_000))
        let count = try Threshold(metric: "delivery.misdelivered", expression: "count == 0")
        #expect(count.holds(for: 0) && !count.holds(for: 1))
        #expect(try Threshold(metric: "x", expression: "value < 0.1%").bound == 0.001)
        #expect(throws: Threshold.ParseError.self) { try Threshold(metric: "x", expression: "p(99) 250ms") }
        #expect(throws: Threshold.ParseError.self) { try Threshold(metric: "x", expression: "q(99) < 1") }
        #expect(MetricKind.latency.supports(.percentile(99)) && !MetricKind.counter.supports(.percentile(99)))
    }

    @Test("the same scenario gives the same fleet")
    func deterministicFleet() {
        let scenario = Scenario(
            name: "t", seed: 7,
            fleet: .init(users: 50, devicesPerUser: .uniform(min: 1, max: 3), platforms: [.apns: 1, .fcm: 1, .wns: 1],
                arrival: .constant(Rate(perSecond: 100), for: .zero)),
            leakProbeShare: 0.1
        )
        let a = FleetPlan(scenario: scenario)
        let b = FleetPlan(scenario: scenario)
        #expect(a.devices == b.devices)
        #expect(Set(a.devices.map(\.platform)).count == 3)
        #expect(a.devices.allSatisfy { $0.platform != .apns || $0.token.count == 64 })
        #expect(a.devices.last!.arrival == Int64(a.devices.count) * 10_000_000)
        var other = scenario
        other.seed = 8
        #expect(FleetPlan(scenario: other).devices != a.devices)
    }
}

@Suite("Reconnect backoff")
struct BackoffTests {
    @Test("waits grow exponentially to the cap, jittered below the ceiling, and start over after a reset")
    func growth() {
        var backoff = Backoff(base: .milliseconds(100), cap: .seconds(2), seed: 7)
        var ceilings: [Int64] = []
        for attempt in 0..<8 {
            let ceiling = min(2_000_000_000, Int64(100_000_000) << attempt)
            let wait = backoff.next()
            #expect(wait >= 0 && wait <= ceiling, "attempt \(attempt): \(wait)")
            ceilings.append(ceiling)
        }
        #expect(ceilings.last == 2_000_000_000 && backoff.attempt == 8)
        backoff.reset()
        #expect(backoff.next() <= 100_000_000)
        // Jitter: a fleet does not retry in lockstep.
        let draws = (0..<50).map { seed -> Int64 in
            var b = Backoff(seed: UInt64(seed))
            _ = b.next()
            return b.next()
        }
        #expect(Set(draws).count > 40)
    }
}

extension LedgerTests {
    @Test("a run that stopped listening early leaves its last deadline's pairs indeterminate, not lost")
    func listeningEndedEarly() {
        var (ledger, a1, _, _) = ledger()
        ledger.record(send(1, to: 0, platforms: [.apns], at: 100 * Self.ms))
        ledger.record(send(2, to: 0, platforms: [.apns], at: 9_000 * Self.ms))
        ledger.record(.init(device: a1, attribution: .send(1), time: 200 * Self.ms))
        let whole = ledger.verdict(deadline: .seconds(5))
        #expect(whole.total.lost == 1)
        let cut = ledger.verdict(deadline: .seconds(5), listeningEnded: 10_000 * Self.ms)
        #expect(cut.total.lost == 0 && cut.total.indeterminate == 1 && cut.total.delivered == 1)
    }
}
