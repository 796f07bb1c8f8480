import Foundation
import PushFleetCore
import PushFleetLedger
import PushFleetResults
import PushFleetTestSupport
import Testing

/// A run long enough to fold (judge settled sends as it goes and let them go): nothing a broken
/// backend did is hidden by it, and the tables built from the folded sends' summaries are whole.
@Suite("Folding runs")
struct FoldingRunTests {
    static func scenario(backend: String, pushService: String) -> String {
        """
        name: folding
        seed: 11
        target: { backend: "\(backend)", pns: "\(pushService)" }
        fleet:
          users: 6
          devices_per_user: 1
          platforms: { apns: 1 }
        lifecycle: [login, register, connect, receive, fetch_secure]
        traffic:
          - { name: plain, kind: plain, platforms: [apns], rate: 20/s, duration: 14s }
          - { name: secure, kind: secure, rate: 5/s, duration: 14s }
        deadline: 2s
        horizon: 3s
        grace: 1s
        thresholds:
          sends.late_start_ratio: []
        """
    }

    @Test("a backend that misdelivers 3, drops 2 and duplicates 4 is caught exactly while the run folds its settled sends")
    func faultsSurviveFolding() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let result = try await FleetRunTests.behindFaultyBackend(system, misdeliver: 3, drop: 2, duplicate: 4) { _, proxy in
                try await FleetRunTests.run(Self.scenario(backend: proxy, pushService: system.pushService))
            }
            let folded = result.counters["sends.folded"] ?? 0
            #expect(folded > 0, "nothing was folded")
            #expect(folded < result.counters["sends"] ?? 0)
            #expect(result.delivery.misdelivered == 3)
            #expect(result.delivery.lost == 2)
            #expect(result.delivery.duplicates == 4)
            #expect(result.delivery.stale == 0)
            #expect(result.delivery.indeterminate == 0)
            #expect(result.delivery.expected == result.delivery.delivered + result.delivery.late + result.delivery.lost)
            #expect(!result.passed)
            #expect(result.incidentTotals?["lost"] == 2)
            #expect((result.incidents ?? []).filter { $0.outcome == "duplicate" }.allSatisfy { $0.recipient != nil })
            // Latencies of every delivered pair, folded or not.
            let delivery = result.histograms["delivery"]
            #expect(delivery?.count == result.delivery.delivered + result.delivery.late)
            #expect(result.users.filter { $0.counts.delivered > 0 }.allSatisfy { $0.p50Ms != nil && $0.p99Ms != nil })
            #expect(result.timeseries.contains { $0.deliveryP50Ms != nil })
            #expect(result.hops?.breakdown.isEmpty == false)
        }
    }
}
