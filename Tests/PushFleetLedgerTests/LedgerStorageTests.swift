import Foundation
import PropertyBased
@testable import PushFleetCore
@testable import PushFleetLedger
import Testing

/// How the ledger stores what a run records by the million: sends in place by number, content
/// ids as their bytes, platforms as flags. Storage must never change a verdict.
@Suite("Delivery ledger: compact storage")
struct LedgerStorageTests {
    static func send(_ id: Int) -> DeliveryLedger.Send {
        .init(id: id, from: 0, to: 0, kind: .plain, platforms: [.apns], intended: Int64(id), start: Int64(id), end: Int64(id) + 1, succeeded: true)
    }

    @Test("a send table finds every send by id, in place or aside, and counts each once")
    func sendTable() {
        var table = DeliveryLedger.SendTable()
        for id in [5, 1, 3, 2, 4] { table[id] = Self.send(id) }
        // Off the pattern or absurdly far ahead: kept aside, no slot allocated up to it.
        for id in [0, -7, 1 << 40] { table[id] = Self.send(id) }
        table[3] = Self.send(3)
        #expect(table.count == 8)
        #expect(table[3]?.start == 3 && table[1 << 40]?.id == 1 << 40 && table[-7]?.id == -7 && table[6] == nil)
        #expect(table.values.map(\.id).sorted() == [-7, 0, 1, 2, 3, 4, 5, 1 << 40])
        #expect(Set(table.keys).count == 8)

        var shard = DeliveryLedger.SendTable.spaced(stride: 4, offset: 2)
        for id in [3, 11, 7, 5] { shard[id] = Self.send(id) }
        #expect(shard.count == 4 && shard[7]?.id == 7 && shard[5]?.id == 5 && shard[4] == nil && shard[15] == nil)
        #expect(shard.values.map(\.id).sorted() == [3, 5, 7, 11])
    }

    @Test("content ids round-trip exactly: UUIDs in either canonical case as bytes, anything else as text")
    func contentIDs() async {
        let uuid = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"
        for text in [uuid, uuid.uppercased(), "3F2504E0-4f89-11d3-9a0c-0305e82c3301", "", "n-1", String(repeating: "é", count: 40), "3f2504e0-4f89-11d3-9a0c-0305e82c330", "12345678-1234-1234-1234-123456789012", "3f2504e04f8911d39a0c0305e82c3301xxxx", "3f2504e0-4f89-11d3-9a0c-0305e82c330g", "{f2504e0-4f89-11d3-9a0c-0305e82c3301}"] {
            #expect(CompactText(text).text == text)
            var receipt = DeliveryLedger.Receipt(device: 0, attribution: .content(text), time: 1, contentID: text)
            #expect(receipt.contentID == text)
            receipt.contentID = nil
            #expect(receipt.contentID == nil)
        }
        await propertyCheck(count: 300, input: Gen.uint64()) { seed in
            var rng = SplitMix64(seed: seed)
            let bytes = (0..<Int(rng.next() % 48)).map { _ in UInt8(32 + rng.next() % 95) }
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(CompactText(text).text == text)
            let id = UUID().uuidString
            #expect(CompactText(id).text == id && CompactText(id.lowercased()).text == id.lowercased())
        }
    }

    @Test("a send's platforms are a set: membership as given, listed once each in declaration order")
    func platforms() {
        var send = DeliveryLedger.Send(id: 1, from: 0, to: 0, kind: .secure, platforms: [.wns, .apns, .wns], intended: 0, start: 0, end: 1, succeeded: true)
        #expect(send.platforms == [.apns, .wns])
        #expect(send.targets(.apns) && send.targets(.wns) && !send.targets(.fcm))
        send.platforms = [.fcm]
        #expect(send.platforms == [.fcm] && !send.targets(.apns))
        send.platforms = []
        #expect(send.platforms.isEmpty)
    }

    @Test("on random timelines a ledger numbering its sends as a shard judges exactly as a plain one")
    func spacedLedgerJudgesTheSame() async {
        await propertyCheck(count: 300, input: Gen.uint64()) { seed in
            let plain = LedgerPropertyTests.timeline(seed: seed).ledger
            var spaced = DeliveryLedger(users: plain.devicesOfUser.count, sendStride: 3, offset: Int(seed % 3))
            for device in plain.devices { _ = spaced.addDevice(device) }
            for (device, changes) in plain.transitions.enumerated() {
                for change in changes { spaced.setEligible(device, change.eligible, at: change.time, since: change.start) }
            }
            for send in plain.sends.values { spaced.record(send) }
            for receipt in plain.receipts { spaced.record(receipt) }
            for rejection in plain.rejections {
                spaced.rejections.append(rejection)
                spaced.settle(rejection.attribution, device: rejection.device, at: rejection.time)
            }
            for leak in plain.probeLeaks { spaced.record(leak) }
            spaced.trail = plain.trail
            let a = plain.verdict(deadline: .seconds(5))
            let b = spaced.verdict(deadline: .seconds(5))
            #expect(a.total == b.total && a.byUser == b.byUser && a.incidentTotals == b.incidentTotals, "seed \(seed)")
            #expect(plain.awaited == spaced.awaited, "seed \(seed)")
        }
    }

    @Test("a lazy schedule gives exactly the instants of the whole list, stage by stage")
    func schedule() {
        let profiles = [
            LoadProfile.constant(Rate(perSecond: 7), for: .seconds(3)),
            LoadProfile(stages: [Stage(duration: .seconds(2), target: Rate(perSecond: 50)), Stage(duration: .seconds(1), target: Rate(perSecond: 50)), Stage(duration: .seconds(2), target: Rate(perSecond: 0))]),
            LoadProfile(stages: []),
        ]
        for profile in profiles {
            let all = Array(profile.schedule)
            #expect(Double(all.count).rounded() == profile.expectedCount.rounded())
            #expect(profile.instants(limit: 5) == Array(all.prefix(5)))
            #expect(all == all.sorted())
        }
    }
}
