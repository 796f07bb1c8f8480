import Logging
import PushFleetCore
import PushFleetLauncher
import PushFleetLedger
import PushFleetResults
import PushFleetScenario
import PushFleetTestSupport
import Synchronization
import Testing

@testable import PushFleetEngine

/// Arrivals past the setup limit wait as a place in the arrival order, not as tasks, and their
/// setup time still runs from their intended arrival.
@Suite("Setup admission")
struct SetupAdmissionTests {
    final class Flag: Sendable {
        private let value = Atomic<Int>(0)
        func set(_ new: Int) { value.store(new, ordering: .relaxed) }
        var current: Int { value.load(ordering: .relaxed) }
    }

    @Test("at the limit an arrival waits until a setup finishes, and a stop releases it unadmitted")
    func admission() async throws {
        let tracker = SetupTracker(total: 4, limit: 2)
        #expect(await tracker.admit() == .admitted(waited: false))
        #expect(await tracker.admit() == .admitted(waited: false))
        #expect(tracker.atLimit)
        let third = Flag()
        let waiting = Task {
            let admitted = await tracker.admit()
            third.set(admitted == .admitted(waited: true) ? 1 : 2)
        }
        try await Task.sleep(for: .milliseconds(50))
        #expect(third.current == 0, "no slot is free: the third arrival waits")
        tracker.finished()
        await waiting.value
        #expect(third.current == 1, "the finished setup's slot passed to it")
        #expect(tracker.atLimit, "the slot was handed over, not freed")

        let fourth = Flag()
        let stopped = Task {
            let admitted = await tracker.admit()
            fourth.set(admitted == .stopping ? 2 : 1)
        }
        try await Task.sleep(for: .milliseconds(50))
        #expect(fourth.current == 0)
        tracker.releaseAll()
        await stopped.value
        #expect(fourth.current == 2, "a stopping run admits nobody")
        #expect(await tracker.admit() == .stopping)
        await tracker.waitForAll()
    }

    @Test("every device counts once towards the fleet being in, whatever the limit")
    func waitForAll() async throws {
        let tracker = SetupTracker(total: 3, limit: 1)
        let done = Flag()
        let all = Task {
            await tracker.waitForAll()
            done.set(1)
        }
        for _ in 0..<3 {
            #expect(await tracker.admit() == .admitted(waited: false))
            #expect(done.current == 0)
            tracker.finished()
        }
        await all.value
        #expect(done.current == 1)
        #expect(!tracker.atLimit)
    }

    static let yaml = """
        name: setup-admission
        seed: 3
        target: embedded
        fleet:
          users: 24
          devices_per_user: 1
          platforms: { apns: 1, fcm: 1 }
          arrival: { rate: 10000/s }
        lifecycle: [login, register, connect, receive]
        traffic:
          - { name: plain, kind: plain, rate: 10/s, duration: 1s }
        deadline: 30s
        grace: 500ms
        quiet_period: 100ms
        thresholds:
          sends.late_start_ratio: []
        """

    @Test("one setup at a time: each device's setup runs from its intended arrival, so the waits add up", arguments: [1, 4096])
    func heldArrivalsAreMeasured(limit: Int) async throws {
        let result = try await RunGate.exclusive {
            let scenario = try ScenarioLoader.parse(Self.yaml, file: "setup-admission.yaml")
            var logger = Logger(label: "setup-admission")
            logger.logLevel = .warning
            var options = FleetRunner.Options(scenarioFile: "setup-admission.yaml", scenarioText: Self.yaml, version: "test", logger: logger)
            options.setupsInFlight = limit
            return try await FleetRunner(scenario: scenario, options: options).run()
        }
        #expect(result.devices.ready == 24)
        let corrected = try #require(result.histograms["setup"])
        let raw = try #require(result.histograms["setup.raw"])
        #expect(corrected.count == 24 && raw.count == 24)
        #expect(result.operations.contains { $0.name == "setup" && $0.measure == "corrected" })
        #expect(result.operations.contains { $0.name == "setup" && $0.measure == "raw" })
        #expect(corrected.max >= raw.max)
        let held = result.markers.contains { $0.label.contains("arrivals wait their turn") }
        if limit == 1 {
            // One at a time: the last device was ready no sooner than every setup's own time
            // added up, less the 2.3 ms over which the 24 arrived (histogram precision: 0.1%).
            let serial = raw.mean * Double(raw.count)
            #expect(Double(corrected.max) >= serial * 0.99 - 2_300_000, "last \(corrected.max) ns, setups' own \(serial) ns")
            #expect(corrected.mean > raw.mean * 3, "waiting for a slot counts in the corrected figure")
            #expect(held)
        } else {
            #expect(!held)
        }
        #expect(result.delivery.lost == 0 && result.delivery.misdelivered == 0)
    }
}
