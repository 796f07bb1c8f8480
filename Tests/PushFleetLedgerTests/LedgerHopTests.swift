import PushFleetCore
import PushFleetLedger
import Testing

/// Where each lost, late and unverified pair went wrong, judged from the push service's reports
/// and the paths receipts carry, on hand-built timelines (no I/O).
@Suite("Delivery ledger: hops")
struct LedgerHopTests {
    static let ms: Int64 = 1_000_000
    static let run = "abc123"

    struct Fleet {
        var ledger: DeliveryLedger
        /// alice: apns, fcm; bob: apns.
        var alicePhone: Int
        var aliceAndroid: Int
        var bobPhone: Int
        var tokens: [String]
    }

    /// Two users, three devices with tokens carrying the run id, watched from t = 0.
    func fleet(watched: Bool = true) -> Fleet {
        var ledger = DeliveryLedger(users: 2)
        let tokens = ["\(Self.run)aa01", "fcm_\(Self.run)_b2", "\(Self.run)bb03"]
        let a1 = ledger.addDevice(.init(user: 0, platform: .apns, token: tokens[0]))
        let a2 = ledger.addDevice(.init(user: 0, platform: .fcm, token: tokens[1]))
        let b1 = ledger.addDevice(.init(user: 1, platform: .apns, token: tokens[2]))
        for device in [a1, a2, b1] { ledger.setEligible(device, true, at: 0) }
        let layouts: [Scenario.PlatformName: PushLayout] = [
            .apns: PushLayout(secureID: [PushLocation(.json(try! JSONPointer("/secureId")))]),
            .fcm: PushLayout(secureID: [PushLocation(.json(try! JSONPointer("/message/data/secureId")))]),
        ]
        ledger.setPushReader(.init(layouts: layouts, run: Self.run))
        if watched { ledger.setPushServiceView(.watched(since: 0, gaps: [])) }
        return Fleet(ledger: ledger, alicePhone: a1, aliceAndroid: a2, bobPhone: b1, tokens: tokens)
    }

    func send(_ id: Int, to user: Int, kind: Scenario.Traffic.Kind = .plain, platforms: [Scenario.PlatformName] = [.apns, .fcm], at start: Int64)
        -> DeliveryLedger.Send
    {
        .init(id: id, from: 1 - user, to: user, kind: kind, platforms: platforms, intended: start - 2 * Self.ms, start: start, end: start + 5 * Self.ms, succeeded: true)
    }

    func plainBody(_ send: Int, platform: String) -> String {
        platform == "fcm"
            ? #"{"message":{"token":"t","data":{"message":"From x: pf:\#(Self.run):\#(send)"}}}"#
            : #"{"aps":{"alert":"From x: pf:\#(Self.run):\#(send)"}}"#
    }

    /// A push's first report.
    func handed(
        _ push: UInt64, _ step: PushHop.Step = .accepted, token: String, platform: String, body: String, at: Int64, status: Int? = nil, reason: String? = nil,
        hubAt: Int64? = nil
    ) -> PushHop {
        PushHop(push: push, step: step, at: at, platform: platform, token: token, pushType: "alert", body: body, hubAt: hubAt, status: status, reason: reason)
    }

    func next(_ push: UInt64, _ step: PushHop.Step, token: String, platform: String = "apns", at: Int64, delay: Int64? = nil) -> PushHop {
        PushHop(push: push, step: step, at: at, platform: platform, token: token, delay: delay)
    }

    @Test("pushes the push service refused are lost at the push service, with each platform's status and reason; the funnel stops at handed")
    func refusedByThePushService() {
        var f = fleet()
        for id in 1...3 { f.ledger.record(send(id, to: 0, at: Int64(id) * 100 * Self.ms)) }
        var push: UInt64 = 0
        for id in 1...3 {
            let at = Int64(id) * 100 * Self.ms + 2 * Self.ms
            push += 1
            f.ledger.record(handed(push, .refused, token: f.tokens[0], platform: "apns", body: plainBody(id, platform: "apns"), at: at, status: 403, reason: "InvalidProviderToken"))
            push += 1
            f.ledger.record(handed(push, .refused, token: f.tokens[1], platform: "fcm", body: plainBody(id, platform: "fcm"), at: at, status: 401, reason: "UNAUTHENTICATED"))
        }
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.lost == 6)
        let apns = DeliveryLedger.Explanation(outcome: .lost, hop: .pushService, cause: .refused, platform: .apns, status: 403, reason: "InvalidProviderToken")
        let fcm = DeliveryLedger.Explanation(outcome: .lost, hop: .pushService, cause: .refused, platform: .fcm, status: 401, reason: "UNAUTHENTICATED")
        #expect(verdict.explanations == [apns: 3, fcm: 3])
        #expect(verdict.incidents.allSatisfy { $0.explanation != nil })
        let funnel = verdict.funnel[.apns]!
        #expect(funnel.sends == 3 && funnel.sendsAccepted == 3 && funnel.expected == 3)
        #expect(funnel.handed == 3 && funnel.accepted == 0 && funnel.written == 0 && funnel.received == 0 && funnel.inHand == 0)
    }

    @Test("a pair with no report at all was never pushed by the backend; with a gap in the reports, or unwatched, the hop is unknown")
    func neverReached() {
        var f = fleet()
        f.ledger.record(send(1, to: 0, platforms: [.apns], at: 100 * Self.ms))
        f.ledger.record(send(2, to: 0, platforms: [.apns], at: 10_000 * Self.ms))
        f.ledger.addPushServiceGap(9_000 * Self.ms..<12_000 * Self.ms)
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.lost == 2)
        #expect(verdict.explanations[.init(outcome: .lost, hop: .backend, cause: .notPushed, platform: .apns)] == 1)
        #expect(verdict.explanations[.init(outcome: .lost, hop: .unknown, cause: .unwatched, platform: .apns, reason: "the push service's reports had a gap")] == 1)

        var unwatched = fleet(watched: false)
        unwatched.ledger.record(send(1, to: 0, platforms: [.apns], at: 100 * Self.ms))
        let blind = unwatched.ledger.verdict(deadline: .seconds(5))
        #expect(blind.explanations.keys.map(\.hop) == [.unknown])
        #expect(blind.funnel[.apns]?.handed == nil && blind.funnel[.apns]?.expected == 1)
    }

    @Test("accepted pushes lost at the push service or the device: dropped, held, expired, replaced, written but never received")
    func lostAfterAcceptance() {
        var f = fleet()
        let token = f.tokens[0]
        let steps: [[PushHop.Step]] = [[.dropped], [.held], [.held, .expired], [.held, .replaced], [.written], [.delayed], [.holdFull], [.notStored]]
        for (index, later) in steps.enumerated() {
            let id = index + 1
            let start = Int64(id) * 1_000 * Self.ms
            f.ledger.record(send(id, to: 0, platforms: [.apns], at: start))
            let push = UInt64(id)
            f.ledger.record(handed(push, token: token, platform: "apns", body: plainBody(id, platform: "apns"), at: start + Self.ms))
            for (offset, step) in later.enumerated() {
                f.ledger.record(next(push, step, token: token, at: start + Int64(offset + 2) * Self.ms, delay: step == .delayed ? 9 * Self.ms : nil))
            }
        }
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        // A held push replaced by a newer one is what the platform promises: replaced, not lost.
        #expect(verdict.total.lost == steps.count - 1 && verdict.total.replaced == 1)
        func count(_ hop: DeliveryLedger.Hop, _ cause: DeliveryLedger.Cause) -> Int? {
            verdict.explanations[.init(outcome: cause == .replaced ? .replaced : .lost, hop: hop, cause: cause, platform: .apns)]
        }
        #expect(count(.pushService, .dropped) == 1 && count(.pushService, .held) == 1 && count(.pushService, .expired) == 1)
        #expect(count(.pushService, .replaced) == 1 && count(.device, .notReceived) == 1 && count(.pushService, .inFlight) == 1)
        #expect(count(.pushService, .holdFull) == 1 && count(.pushService, .notStored) == 1)
        let funnel = verdict.funnel[.apns]!
        #expect(funnel.handed == steps.count && funnel.accepted == steps.count && funnel.written == 1 && funnel.received == 0)
    }

    @Test("a lost or late pair's incident carries the push service's part: its latest step and when, and the provider request's trace context")
    func pushPartOfIncidents() throws {
        var f = fleet()
        let token = f.tokens[0]
        let context = TraceIdentity(high: 7, low: 0x1234, span: 0xBEEF)
        // Send 1: refused at 101 ms, its request under a trace context; send 2: accepted at 201 ms
        // without one, dropped at 203 ms; send 3: received late, held while its device was offline.
        f.ledger.record(send(1, to: 0, platforms: [.apns], at: 100 * Self.ms))
        var refused = handed(1, .refused, token: token, platform: "apns", body: plainBody(1, platform: "apns"), at: 101 * Self.ms, status: 410, reason: "Unregistered")
        refused.trace = context.traceparent
        f.ledger.record(refused)
        f.ledger.record(send(2, to: 0, platforms: [.apns], at: 200 * Self.ms))
        f.ledger.record(handed(2, token: token, platform: "apns", body: plainBody(2, platform: "apns"), at: 201 * Self.ms))
        f.ledger.record(next(2, .dropped, token: token, at: 203 * Self.ms))
        f.ledger.record(send(3, to: 1, platforms: [.apns], at: 300 * Self.ms))
        let path = DeliveryLedger.PushPath(acceptedAt: 301 * Self.ms, writtenAt: 7_000 * Self.ms, held: true, receivedAt: 7_100 * Self.ms, context: context)
        f.ledger.record(.init(device: f.bobPhone, attribution: .send(3), time: 7_100 * Self.ms, path: path))

        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.lost == 2 && verdict.total.late == 1)
        let parts = Dictionary(uniqueKeysWithValues: verdict.incidents.compactMap { incident in incident.send.map { ($0, incident.push) } })
        #expect(parts[1] == .init(step: .refused, handedAt: 101 * Self.ms, stepAt: 101 * Self.ms, context: .init(low: 0x1234, span: 0xBEEF)))
        #expect(parts[2] == .init(step: .dropped, handedAt: 201 * Self.ms, stepAt: 203 * Self.ms, context: nil))
        #expect(parts[3] == .init(step: .written, handedAt: 301 * Self.ms, stepAt: 7_000 * Self.ms, context: .init(low: 0x1234, span: 0xBEEF)))

        // A pair the backend never pushed has no part of the push service's.
        var never = fleet()
        never.ledger.record(send(9, to: 1, platforms: [.apns], at: 100 * Self.ms))
        let incident = try #require(never.ledger.verdict(deadline: .seconds(5)).incidents.first)
        #expect(incident.explanation?.cause == .notPushed && incident.push == nil)
    }

    @Test("a delivered push's hops add up to its delivery latency, and with the fetch to end to end; a received push leaves no report behind")
    func hopsAddUp() {
        var f = fleet()
        let start = 1_000 * Self.ms
        f.ledger.record(send(1, to: 0, kind: .secure, platforms: [.apns], at: start))
        let path = DeliveryLedger.PushPath(acceptedAt: start + 3 * Self.ms, writtenAt: start + 4 * Self.ms, receivedAt: start + 6 * Self.ms)
        f.ledger.record(handed(7, token: f.tokens[0], platform: "apns", body: plainBody(1, platform: "apns"), at: start + 3 * Self.ms))
        f.ledger.record(next(7, .written, token: f.tokens[0], at: start + 4 * Self.ms))
        f.ledger.record(.init(device: f.alicePhone, attribution: .send(1), time: start + 6 * Self.ms, content: .fetched(at: start + 9 * Self.ms), path: path), push: 7)
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.delivered == 1)
        let delivery = verdict.deliveries[0]
        let hops = delivery.hops!
        #expect(hops.backend == 3 * Self.ms && hops.pushService == Self.ms && hops.device == 2 * Self.ms && hops.fetch == 3 * Self.ms)
        #expect(hops.backendCorrected == 5 * Self.ms && hops.hub == nil)
        #expect(hops.total == delivery.raw && hops.total + hops.fetch! == delivery.endToEndRaw)
        #expect(hops.backendCorrected + hops.pushService + hops.device == delivery.corrected)
        #expect(verdict.funnel[.apns]!.written == 1 && verdict.funnel[.apns]!.inHand == 1)
        // The receipt came after the report: nothing is kept.
        #expect(f.ledger.trail.reports == 2)
    }

    @Test("a receipt before its push's reports (reports come later over the network) leaves nothing kept once they come")
    func receiptFirst() {
        var f = fleet()
        f.ledger.record(send(1, to: 0, platforms: [.apns], at: 100 * Self.ms))
        let path = DeliveryLedger.PushPath(acceptedAt: 101 * Self.ms, writtenAt: 102 * Self.ms, receivedAt: 103 * Self.ms)
        f.ledger.record(.init(device: f.alicePhone, attribution: .send(1), time: 103 * Self.ms, path: path), push: 3)
        f.ledger.record(handed(3, token: f.tokens[0], platform: "apns", body: plainBody(1, platform: "apns"), at: 101 * Self.ms))
        f.ledger.record(next(3, .written, token: f.tokens[0], at: 102 * Self.ms))
        f.ledger.record(send(2, to: 0, platforms: [.apns], at: 200 * Self.ms))
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.delivered == 1 && verdict.total.lost == 1)
        // Send 2's pair is not explained by push 3, which was received.
        #expect(verdict.explanations == [.init(outcome: .lost, hop: .backend, cause: .notPushed, platform: .apns): 1])
    }

    @Test("clocks a little apart never give a negative hop: each instant is held between the one before and the receipt")
    func clockSkew() {
        let us: Int64 = 1_000
        let path = DeliveryLedger.PushPath(acceptedAt: 90 * us, writtenAt: 200 * us, receivedAt: 150 * us)
        let hops = DeliveryLedger.HopTimes.of(path, start: 100 * us, intended: 95 * us, received: 150 * us, inHand: nil)
        #expect(hops.backend == 0 && hops.pushService == 50 * us && hops.device == 0 && hops.total == 50 * us && hops.backendCorrected == 5 * us)
    }

    @Test("a late pair is explained by its longest hop: held while offline, a latency fault, or a slow backend")
    func lateByHop() {
        var f = fleet()
        // Accepted and written, in ms after the send's start; received at 7,100 ms.
        let cases: [(accepted: Int64, written: Int64, held: Bool, delayed: Bool, cause: DeliveryLedger.Cause, hop: DeliveryLedger.Hop)] = [
            (1, 7_000, true, false, .heldOffline, .pushService),
            (1, 7_000, false, true, .delayed, .pushService),
            (6_900, 6_901, false, false, .slow, .backend),
            (1, 2, false, false, .slow, .device),
        ]
        for (index, item) in cases.enumerated() {
            let start = Int64(index + 1) * 100_000 * Self.ms
            let received = start + 7_100 * Self.ms
            f.ledger.record(send(index + 1, to: 1, platforms: [.apns], at: start))
            let path = DeliveryLedger.PushPath(
                acceptedAt: start + item.accepted * Self.ms, writtenAt: start + item.written * Self.ms, held: item.held, delayed: item.delayed, receivedAt: received
            )
            f.ledger.record(.init(device: f.bobPhone, attribution: .send(index + 1), time: received, path: path))
        }
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.late == 4)
        for (_, _, _, _, cause, hop) in cases {
            #expect(verdict.explanations[.init(outcome: .late, hop: hop, cause: cause, platform: .apns)] == 1, "\(hop) \(cause)")
        }
    }

    @Test("a secure push whose content id no answer gave is matched to its pair by the device's token and the time")
    func byToken() {
        var f = fleet()
        f.ledger.record(send(1, to: 0, kind: .secure, platforms: [.apns], at: 100 * Self.ms))
        f.ledger.record(send(2, to: 0, kind: .secure, platforms: [.apns], at: 20_000 * Self.ms))
        f.ledger.record(handed(1, .refused, token: f.tokens[0], platform: "apns", body: #"{"aps":{"content-available":1},"secureId":"s-1"}"#, at: 102 * Self.ms, status: 400, reason: "BadTopic"))
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.lost == 2)
        #expect(verdict.explanations[.init(outcome: .lost, hop: .pushService, cause: .refused, platform: .apns, status: 400, reason: "BadTopic", byToken: true)] == 1)
        // The one report explains one pair only: send 2 came long after it.
        #expect(verdict.explanations[.init(outcome: .lost, hop: .backend, cause: .notPushed, platform: .apns)] == 1)
    }

    @Test("a push to a token that is no device's explains the pair it was meant for; an unfetched fetch is the fetch's")
    func otherTokenAndFetch() {
        var f = fleet()
        f.ledger.record(send(1, to: 1, platforms: [.apns], at: 100 * Self.ms))
        f.ledger.record(handed(1, token: "\(Self.run)ffff", platform: "apns", body: plainBody(1, platform: "apns"), at: 101 * Self.ms))
        f.ledger.record(send(2, to: 1, kind: .secure, platforms: [.apns], at: 200 * Self.ms))
        f.ledger.record(.init(device: f.bobPhone, attribution: .send(2), time: 210 * Self.ms, content: .failed(reason: "status_404")))
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.explanations[.init(outcome: .lost, hop: .backend, cause: .otherToken, platform: .apns, reason: "\(Self.run)ffff")] == 1)
        #expect(verdict.explanations[.init(outcome: .unverified, hop: .fetch, cause: .fetchFailed, platform: .apns, reason: "status_404")] == 1)
    }

    @Test("behind a hub: the hub never had the send, or had it and pushed nothing to the device; a hub hop in the latencies")
    func throughAHub() {
        var f = fleet()
        f.ledger.record(send(1, to: 1, platforms: [.apns], at: 100 * Self.ms))
        f.ledger.record(send(2, to: 1, platforms: [.apns], at: 200 * Self.ms))
        f.ledger.record(HubNote(at: 102 * Self.ms, body: plainBody(1, platform: "apns"), format: "apple", targets: 0))
        f.ledger.record(send(3, to: 1, platforms: [.apns], at: 300 * Self.ms))
        let path = DeliveryLedger.PushPath(hubAt: 302 * Self.ms, acceptedAt: 305 * Self.ms, writtenAt: 306 * Self.ms, receivedAt: 310 * Self.ms)
        f.ledger.record(.init(device: f.bobPhone, attribution: .send(3), time: 310 * Self.ms, path: path))
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.explanations[.init(outcome: .lost, hop: .hub, cause: .hubSkipped, platform: .apns)] == 1)
        #expect(verdict.explanations[.init(outcome: .lost, hop: .backend, cause: .notToHub, platform: .apns)] == 1)
        let hops = verdict.deliveries[0].hops!
        #expect(hops.backend == 2 * Self.ms && hops.hub == 3 * Self.ms && hops.pushService == Self.ms && hops.device == 4 * Self.ms)
        #expect(hops.total == verdict.deliveries[0].raw)
    }

    @Test("a misdelivered push names the token the backend addressed")
    func misdeliveredToken() {
        var f = fleet()
        f.ledger.record(send(1, to: 0, platforms: [.apns], at: 100 * Self.ms))
        f.ledger.record(.init(device: f.bobPhone, attribution: .send(1), time: 110 * Self.ms))
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.incidents.contains { $0.outcome == .misdelivered && $0.detail.contains("addressed to token \(f.tokens[2])") })
    }

    @Test("reports recorded in two parts and merged explain exactly as one ledger that recorded them all")
    func mergedTrails() throws {
        var whole = fleet()
        var first = fleet()
        var second = fleet()
        for id in 1...4 {
            let start = Int64(id) * 100 * Self.ms
            let sent = send(id, to: 0, platforms: [.apns], at: start)
            whole.ledger.record(sent)
            if id % 2 == 0 { first.ledger.record(sent) } else { second.ledger.record(sent) }
        }
        // Push 2 (send 2) is reported to part one and received in part two.
        let reports: [PushHop] = [
            handed(1, .refused, token: whole.tokens[0], platform: "apns", body: plainBody(1, platform: "apns"), at: 101 * Self.ms, status: 403, reason: "BadCertificate"),
            handed(2, token: whole.tokens[0], platform: "apns", body: plainBody(2, platform: "apns"), at: 201 * Self.ms),
            next(2, .written, token: whole.tokens[0], at: 202 * Self.ms),
            handed(3, token: whole.tokens[0], platform: "apns", body: plainBody(3, platform: "apns"), at: 301 * Self.ms),
            next(3, .dropped, token: whole.tokens[0], at: 301 * Self.ms),
        ]
        for report in reports {
            whole.ledger.record(report)
            first.ledger.record(report)
        }
        let receipt = DeliveryLedger.Receipt(
            device: whole.alicePhone, attribution: .send(2), time: 203 * Self.ms,
            path: .init(acceptedAt: 201 * Self.ms, writtenAt: 202 * Self.ms, receivedAt: 203 * Self.ms)
        )
        whole.ledger.record(receipt, push: 2)
        second.ledger.record(receipt, push: 2)
        let merged = try DeliveryLedger.merged([first.ledger, second.ledger])
        let a = whole.ledger.verdict(deadline: .seconds(5))
        let b = merged.verdict(deadline: .seconds(5))
        #expect(a.total == b.total && a.explanations == b.explanations && a.funnel == b.funnel)
        #expect(a.explanations.count == 3)
    }
}

/// Reports a broken or hostile push service could send: never a crash, never unbounded memory,
/// never a pair explained by what was left out.
@Suite("Delivery ledger: hostile reports")
struct LedgerHostileReportTests {
    @Test("past the pushes it keeps, a run leaves reports out as a gap: the pairs they would explain are unknown, not 'never pushed'")
    func boundedReports() {
        var f = LedgerHopTests().fleet()
        f.ledger.keepAtMost(3)
        let ms = LedgerHopTests.ms
        for n in 0..<10 {
            f.ledger.record(
                PushHop(push: UInt64(100 + n), step: .accepted, at: Int64(n) * ms, platform: "apns", token: "\(LedgerHopTests.run)zz\(n)", body: "{}")
            )
        }
        #expect(f.ledger.trail.leftOut == 7)
        f.ledger.record(LedgerHopTests().send(1, to: 0, platforms: [.apns], at: 5 * ms))
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.explanations.keys.map(\.hop) == [.unknown], "\(verdict.explanations)")
    }

    @Test("reports with instants at the ends of time, steps out of order, no first report and unknown tokens are judged, never a crash")
    func oddReports() {
        var f = LedgerHopTests().fleet()
        let token = f.tokens[0]
        f.ledger.record(LedgerHopTests().send(1, to: 0, platforms: [.apns], at: 100 * LedgerHopTests.ms))
        let hops = [
            PushHop(push: 1, step: .written, at: .max, platform: "apns", token: token),
            PushHop(push: 1, step: .accepted, at: .min, platform: "apns", token: token, body: "pf:\(LedgerHopTests.run):1"),
            PushHop(push: 2, step: .expired, at: 0, platform: "sms", token: "?", then: .min),
            PushHop(push: 3, step: .refused, at: 0, platform: "apns", token: token, body: "\u{0}\u{FFFE}", base64: true, status: -1, reason: ""),
        ]
        for hop in hops { f.ledger.record(hop) }
        let path = DeliveryLedger.PushPath(hubAt: .min, acceptedAt: .max, writtenAt: .min, receivedAt: 0)
        let hopsOfPath = DeliveryLedger.HopTimes.of(path, start: -10, intended: -20, received: 0, inHand: 5)
        #expect(hopsOfPath.backend >= 0 && hopsOfPath.pushService >= 0 && hopsOfPath.device >= 0 && hopsOfPath.total == 10)
        // Where such instants enter a run they are held between its start and now.
        #expect(ForeignInstant.onRunClock(wall: .max, offset: 5, start: 100, now: 200) == 200)
        #expect(ForeignInstant.onRunClock(wall: .min, offset: -5, start: 100, now: 200) == 100)
        #expect(ForeignInstant.onRunClock(wall: 140, offset: 10, start: 100, now: 200) == 150)
        #expect(Saturating.subtract(.min, 1) == .min && Saturating.subtract(0, .min) == .max)
        let verdict = f.ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.lost == 1 && verdict.explanations.values.reduce(0, +) == 1)
    }
}
