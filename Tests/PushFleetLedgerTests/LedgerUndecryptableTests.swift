import PushFleetCore
import PushFleetLedger
import Testing

/// Pushes a browser could not decrypt: counted on their own, failing the default gate, and each
/// explains one lost pair of the device in its span (no hop could read which send it was).
@Suite("Delivery ledger: undecryptable Web Push")
struct LedgerUndecryptableTests {
    static let ms: Int64 = 1_000_000

    func send(_ id: Int, to user: Int, at start: Int64) -> DeliveryLedger.Send {
        .init(id: id, from: 1 - user, to: user, kind: .plain, platforms: [.webpush], intended: start, start: start, end: start + 5 * Self.ms, succeeded: true)
    }

    func ledger() -> (DeliveryLedger, browser: Int, other: Int) {
        var ledger = DeliveryLedger(users: 2)
        let browser = ledger.addDevice(.init(user: 0, platform: .webpush, token: "wp_browser_0000000001"))
        let other = ledger.addDevice(.init(user: 1, platform: .webpush, token: "wp_browser_0000000002"))
        for device in [browser, other] { ledger.setEligible(device, true, at: 0) }
        ledger.setPushServiceView(.watched(since: 0, gaps: []))
        return (ledger, browser, other)
    }

    @Test("each undecryptable push is one count and incident; the pairs it leaves lost are put at the device, the rest not")
    func counted() {
        var (ledger, browser, other) = ledger()
        ledger.record(send(1, to: 0, at: 100 * Self.ms))
        ledger.record(send(2, to: 0, at: 200 * Self.ms))
        ledger.record(send(3, to: 0, at: 300 * Self.ms))
        ledger.record(send(4, to: 1, at: 400 * Self.ms))
        ledger.record(.init(device: browser, attribution: .undecryptable, time: 110 * Self.ms, content: .failed(reason: "does not decrypt")))
        ledger.record(.init(device: browser, attribution: .send(2), time: 210 * Self.ms))
        ledger.record(.init(device: other, attribution: .undecryptable, time: 410 * Self.ms, content: .failed(reason: "malformed payload")))
        let verdict = ledger.verdict(deadline: .seconds(5))
        #expect(verdict.total.undecryptable == 2 && verdict.total.delivered == 1 && verdict.total.lost == 3)
        #expect(verdict.byPlatform[.webpush]?.undecryptable == 2 && verdict.byUser[0].undecryptable == 1)
        #expect(verdict.incidents.filter { $0.outcome == .undecryptable }.map(\.detail).sorted() == ["does not decrypt", "malformed payload"])
        let device = DeliveryLedger.Explanation(outcome: .lost, hop: .device, cause: .undecryptable, platform: .webpush)
        // Send 1 and send 4 each met a push that did not decrypt; send 3 met none: its backend pushed nothing.
        #expect(verdict.explanations[device] == 2)
        #expect(verdict.explanations[.init(outcome: .lost, hop: .backend, cause: .notPushed, platform: .webpush)] == 1)
    }

    @Test("the default gate fails a run with one undecryptable push")
    func gate() throws {
        let rule = try #require(DefaultGate.rules.first { $0.metric == "delivery.undecryptable" })
        #expect(rule.expression == "count == 0")
        #expect(MetricName.kind(of: "delivery.undecryptable") == .counter)
        var counts = DeliveryLedger.Counts()
        counts.undecryptable = 1
        #expect(DeliveryLedger.Counts.fields.contains { $0.name == "undecryptable" } && (counts + counts).undecryptable == 2)
    }
}
