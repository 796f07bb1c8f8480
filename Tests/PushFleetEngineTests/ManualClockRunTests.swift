import Logging
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetLedger
import PushFleetResults
import PushFleetScenario
import PushFleetServerSupport
import PushFleetTestSupport
import Synchronization
import Testing

/// A small fleet played on a manual clock: the sockets are real, but every instant the run
/// reads and every wait it makes are the test's to say.
@Suite("Fleet run on a manual clock")
struct ManualClockRunTests {
    static let yaml = """
        name: manual-clock
        seed: 5
        target: embedded
        fleet:
          users: 3
          devices_per_user: 1
          platforms: { apns: 1 }
        lifecycle: [login, register, connect, receive]
        traffic:
          - { name: plain, kind: plain, platforms: [apns], rate: 2/s, duration: 2s }
        deadline: 5s
        grace: 1s
        quiet_period: 100ms
        thresholds:
          delivery.lost: ["count == 0"]
        """

    /// Counts what the fleet asked the backend to send (and whether the run has ended).
    final class Sends: Sendable {
        private let count = Atomic<Int>(0)
        func add() { count.add(1, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
    }

    @Test("sends happen at the manual clock's instants, not real time's, and every push is judged")
    func smallFleet() async throws {
        try await RunGate.exclusive {
            let scenario = try ScenarioLoader.parse(Self.yaml, file: "manual-clock.yaml")
            let start: Int64 = 7_000_000_000
            let clock = ManualRunClock(start: start)
            let sends = Sends()
            let arrived = Readiness<Void>()
            var logger = Logger(label: "manual-clock")
            logger.logLevel = .warning
            var options = FleetRunner.Options(scenarioFile: "manual-clock.yaml", scenarioText: Self.yaml, version: "test", logger: logger)
            options.clock = clock
            options.trace = { trace in if trace.operation == "send" { sends.add() } }
            options.beforeTraffic = { arrived.succeed(()) }
            let finished = Sends()
            let run = Task {
                defer { finished.add() }
                return try await FleetRunner(scenario: scenario, options: options).run()
            }

            // Devices arrive at instant 0 and set up over real sockets while the clock stands still.
            try await arrived.value()
            // The open model's first send is due one interval (500 ms of run time) after the
            // traffic starts: however much real time passes, none is made before the clock says.
            try await Task.sleep(for: .milliseconds(700))
            #expect(sends.value == 0, "real time passed, run time did not: no send yet")
            clock.advance(by: 499_000_000)
            try await Task.sleep(for: .milliseconds(300))
            #expect(sends.value == 0, "1 ms of run time short of the first send")
            clock.advance(by: 1_000_000)
            try await Self.waitUntil { sends.value == 1 }
            // Each later send's instant too: the clock stands still until the send has started,
            // so however late a loaded machine runs the sender, it is never late in run time.
            for due in 2...4 {
                clock.advance(by: 500_000_000)
                try await Self.waitUntil { sends.value == due }
            }
            #expect(sends.value == 4)

            // Then run time goes on in 10 ms steps until the run has drained and ended.
            var steps = 0
            while finished.value == 0, steps < 3_000 {
                clock.advance(by: 10_000_000)
                try await Task.sleep(for: .milliseconds(2))
                steps += 1
            }
            let result = try await run.value
            #expect(result.counters["sends"] == 4, "2/s for 2 s")
            #expect(result.delivery.expected == 4)
            #expect(result.delivery.delivered == 4)
            #expect(result.delivery.lost == 0)
            // A loaded test machine may hold the servers' loops late in real time, which makes the
            // run generator-bound: then it is inconclusive, never failed.
            #expect(result.thresholds.allSatisfy { $0.passed }, "\(result.thresholds.filter { !$0.passed })")
            #expect(result.passed || result.inconclusive, "\(result.generator?.limits ?? [])")
            // The run's own time line is the manual one: whole 1 ms steps, within what the test advanced.
            let elapsed = Double(clock.now() - start) / 1e9
            #expect(result.info.durationSeconds <= elapsed)
            #expect(abs(result.info.durationSeconds * 1000 - (result.info.durationSeconds * 1000).rounded()) < 1e-6)
            #expect(result.info.trafficStartSecond == 0)
            #expect(result.info.trafficEndSecond >= 1.5 && result.info.trafficEndSecond < 2.5)
        }
    }

    /// Polls a condition in real time, for at most 120 s: the bound only catches a hang, as a
    /// starved machine may take seconds to carry a send over its sockets.
    static func waitUntil(_ condition: () -> Bool) async throws {
        try await eventually(within: .seconds(120), condition)
        if !condition() { Issue.record("condition not met within 120 s") }
    }
}
