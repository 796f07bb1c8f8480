import PropertyBased
@testable import PushFleetCore
@testable import PushFleetLedger
import Testing

/// The judge's seams: the drain's running count, ledgers recorded in parts and joined, and
/// verdicts of time windows, each against the whole-ledger verdict on random timelines.
@Suite("Delivery ledger: awaited count, merge, windows")
struct LedgerSeamTests {
    static let ms: Int64 = 1_000_000
    var ms: Int64 { Self.ms }

    static func send(_ id: Int, to user: Int, at start: Int64, succeeded: Bool = true, contentID: String? = nil) -> DeliveryLedger.Send {
        .init(id: id, from: 0, to: user, kind: .plain, platforms: [.apns], intended: start, start: start, end: start + 5 * ms, succeeded: succeeded, contentID: contentID)
    }

    @Test("the awaited count follows sends, receipts, refusals and registrations without judging")
    func awaited() {
        var ledger = DeliveryLedger(users: 2)
        let a = ledger.addDevice(.init(user: 0, platform: .apns))
        let b = ledger.addDevice(.init(user: 0, platform: .apns))
        ledger.setEligible(a, true, at: 0)
        ledger.setEligible(b, true, at: 0)
        #expect(ledger.awaited == 0)
        ledger.record(Self.send(1, to: 0, at: 10 * ms))
        #expect(ledger.awaited == 2)
        ledger.record(DeliveryLedger.Receipt(device: a, attribution: .send(1), time: 12 * ms))
        #expect(ledger.awaited == 1)
        // A duplicate settles nothing more; a refusal settles its pair.
        ledger.record(DeliveryLedger.Receipt(device: a, attribution: .send(1), time: 13 * ms))
        #expect(ledger.awaited == 1)
        ledger.record(DeliveryLedger.Rejection(device: b, refused: .send(1), at: 14 * ms))
        #expect(ledger.awaited == 0)
        // A push that beats its send's answer is counted when the send is recorded.
        ledger.record(DeliveryLedger.Receipt(device: a, attribution: .send(2), time: 21 * ms))
        ledger.record(Self.send(2, to: 0, at: 20 * ms))
        #expect(ledger.awaited == 0, "b's token is dead since 14 ms; a got it before the answer")
        // A failed send awaits nobody; a registration change inside a send's span withdraws it.
        ledger.record(Self.send(3, to: 0, at: 30 * ms, succeeded: false))
        #expect(ledger.awaited == 0)
        ledger.record(Self.send(4, to: 0, at: 40 * ms))
        #expect(ledger.awaited == 1)
        ledger.setEligible(a, false, at: 43 * ms, since: 41 * ms)
        #expect(ledger.awaited == 0)
        // Content whose send is unknown: only a judgement can tell, until its owner is known.
        ledger.setEligible(a, true, at: 50 * ms)
        ledger.record(DeliveryLedger.Receipt(device: a, attribution: .content("x"), time: 62 * ms, content: .failed(reason: "status_500")))
        #expect(ledger.awaited == nil)
        ledger.record(Self.send(5, to: 0, at: 60 * ms, contentID: "x"))
        #expect(ledger.awaited == 0)
        ledger.record(Self.send(6, to: 0, at: 70 * ms))
        #expect(ledger.awaited == 1)
        #expect(ledger.verdict(deadline: .seconds(5)).total.lost == 1)
    }

    @Test("on random timelines the awaited count is the verdict's lost count")
    func awaitedMatchesVerdict() async {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            let ledger = LedgerPropertyTests.timeline(seed: seed).ledger
            let lost = ledger.verdict(deadline: .seconds(5)).total.lost
            if let awaited = ledger.awaited { #expect(awaited == lost, "seed \(seed)") }
        }
    }

    @Test("a ledger recorded in two parts and joined judges exactly as the whole")
    func merge() async throws {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            let whole = LedgerPropertyTests.timeline(seed: seed).ledger
            var rng = SplitMix64(seed: seed ^ 0x5EA)
            var parts = [DeliveryLedger(users: whole.devicesOfUser.count), DeliveryLedger(users: whole.devicesOfUser.count)]
            for index in parts.indices { for device in whole.devices { _ = parts[index].addDevice(device) } }
            // Registrations (and the eligibility ends refusals made) go with the devices' shard;
            // sends, receipts, refusals and leaks wherever they were recorded.
            for (device, changes) in whole.transitions.enumerated() {
                for change in changes { parts[device % 2].setEligible(device, change.eligible, at: change.time, since: change.start) }
            }
            for send in whole.sends.values { parts[Int(rng.next() % 2)].record(send) }
            for receipt in whole.receipts { parts[Int(rng.next() % 2)].record(receipt) }
            for rejection in whole.rejections { parts[Int(rng.next() % 2)].rejections.append(rejection) }
            for leak in whole.probeLeaks { parts[Int(rng.next() % 2)].record(leak) }
            do {
                let merged = try DeliveryLedger.merged(parts)
                let expected = whole.verdict(deadline: .seconds(5))
                let judged = merged.verdict(deadline: .seconds(5))
                #expect(judged.total == expected.total, "seed \(seed)")
                #expect(judged.byUser == expected.byUser, "seed \(seed)")
                #expect(judged.incidentTotals == expected.incidentTotals, "seed \(seed)")
                #expect(judged.deliveries.count == expected.deliveries.count, "seed \(seed)")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }

    @Test("joining ledgers of different fleets, or one send recorded twice, is refused")
    func mergeRefusals() {
        var one = DeliveryLedger(users: 1)
        _ = one.addDevice(.init(user: 0, platform: .apns))
        var other = DeliveryLedger(users: 1)
        _ = other.addDevice(.init(user: 0, platform: .fcm))
        #expect(throws: DeliveryLedger.MergeError.self) { try DeliveryLedger.merged([one, other]) }
        one.record(Self.send(1, to: 0, at: 0))
        var again = DeliveryLedger(users: 1)
        _ = again.addDevice(.init(user: 0, platform: .apns))
        again.record(Self.send(1, to: 0, at: 0))
        #expect(throws: DeliveryLedger.MergeError.self) { try DeliveryLedger.merged([one, again]) }
    }

    @Test("windows that cover a run judge every pair and push once: their counts add up to the whole")
    func windows() async {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            let ledger = LedgerPropertyTests.timeline(seed: seed).ledger
            let whole = ledger.verdict(deadline: .seconds(5))
            var rng = SplitMix64(seed: seed ^ 0x3171D0)
            let last = (ledger.sends.values.map(\.start).max() ?? 0) + 1_000 * Self.ms
            var cuts = (0..<3).map { _ in Int64(rng.next() % UInt64(max(1, last))) }.sorted()
            cuts = [Int64.min] + cuts + [Int64.max]
            var sum = DeliveryLedger.Counts()
            var deliveries = 0
            for index in 0..<(cuts.count - 1) {
                let verdict = ledger.verdict(deadline: .seconds(5), window: cuts[index]..<cuts[index + 1])
                sum = sum + verdict.total
                deliveries += verdict.deliveries.count
            }
            #expect(sum == whole.total, "seed \(seed)")
            #expect(deliveries == whole.deliveries.count, "seed \(seed)")
        }
    }
}
