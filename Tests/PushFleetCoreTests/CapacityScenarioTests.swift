import Foundation
import PushFleetCore
import PushFleetScenario
import Testing

/// The `capacity:` section, the service-rate fault keys, and the scenario one capacity step plays.
@Suite("Capacity scenarios")
struct CapacityScenarioTests {
    static let base = """
        name: cap
        fleet:
          users: 10
          devices_per_user: 2
          platforms: { apns: 1 }
        lifecycle: [login, register, connect, receive]
        traffic:
          - { name: plain, kind: plain, platforms: [apns], rate: 10/s, duration: 5s }
          - { name: other, kind: plain, platforms: [apns], rate: 4/s, duration: 6s, start: 3s }
        """

    static func with(_ capacity: String) -> String { base + "\ncapacity:\n" + capacity }

    /// The issues loading `yaml` reports, checking that loading throws ScenarioIssues.
    static func issues(_ yaml: String) -> [ScenarioIssue] {
        do {
            let scenario = try ScenarioLoader.parse(yaml, file: "cap.yaml")
            Issue.record("loaded although invalid: \(String(describing: scenario.capacity))")
            return []
        } catch {
            // Typed throws: the error is ScenarioIssues.
            let issues: ScenarioIssues = error
            #expect(!issues.issues.isEmpty)
            return issues.issues
        }
    }

    /// The one issue `yaml` has, as printed.
    static func only(_ yaml: String) throws -> String {
        let found = issues(yaml)
        try #require(found.count == 1, "\(found)")
        return found[0].description
    }

    @Test("a full capacity section is read field by field")
    func fullSection() throws {
        let yaml = Self.with(
            """
              vary: rate
              traffic: other
              start: 50/s
              max: 1600/s
              factor: 3
              resolution: 5%
              warmup: 2s
              window: 8s
              repeats: 2
              require: 300/s
            """
        )
        let capacity = try #require(try ScenarioLoader.parse(yaml, file: "cap.yaml").capacity)
        #expect(capacity.vary == .rate)
        #expect(capacity.traffic == "other")
        #expect(capacity.start == 50)
        #expect(capacity.maximum == 1600)
        #expect(capacity.factor == 3)
        #expect(abs(capacity.resolution - 0.05) < 1e-12)
        #expect(capacity.warmup == .seconds(2))
        #expect(capacity.window == .seconds(8))
        #expect(capacity.repeats == 2)
        #expect(capacity.require == 300)
        #expect(capacity.rate == nil)
        #expect(try ScenarioLoader.parse(yaml, file: "cap.yaml").capacityTrafficIndex == 1)

        // A fraction reads as the same share; a rate per minute as per second.
        let fraction = try #require(
            try ScenarioLoader.parse(yaml.replacingOccurrences(of: "resolution: 5%", with: "resolution: 0.05"), file: "cap.yaml").capacity
        )
        #expect(fraction.resolution == 0.05)
        let perMinute = try #require(
            try ScenarioLoader.parse(yaml.replacingOccurrences(of: "start: 50/s", with: "start: 600/m"), file: "cap.yaml").capacity
        )
        #expect(perMinute.start == 10)
    }

    @Test("defaults, and vary: devices with its kept rate")
    func defaultsAndDevices() throws {
        let plain = try #require(try ScenarioLoader.parse(Self.with("  start: 20/s\n  max: 200/s"), file: "cap.yaml").capacity)
        #expect(plain.vary == .rate && plain.traffic == nil)
        #expect(plain.factor == 2 && plain.resolution == 0.05 && plain.repeats == 3)
        #expect(plain.warmup == .seconds(3) && plain.window == .seconds(10))
        #expect(plain.require == nil)
        #expect(try ScenarioLoader.parse(Self.with("  start: 20/s\n  max: 200/s"), file: "cap.yaml").capacityTrafficIndex == 0)

        let devices = try #require(
            try ScenarioLoader.parse(
                Self.with("  vary: devices\n  start: 100\n  max: 2000\n  rate: 20/s\n  require: 500\n  warmup: 0s\n  resolution: 10%"),
                file: "cap.yaml"
            ).capacity
        )
        #expect(devices.vary == .devices)
        #expect(devices.start == 100 && devices.maximum == 2000)
        #expect(devices.rate == Rate(perSecond: 20))
        #expect(devices.require == 500)
        #expect(devices.warmup == .zero)
        #expect(abs(devices.resolution - 0.1) < 1e-12)
    }

    @Test("each invalid capacity setting is refused with its own message")
    func invalidSettings() throws {
        let cases: [(yaml: String, message: String)] = [
            ("  max: 200/s", "capacity.start: required: the first step, a rate such as 100/s"),
            ("  start: 20/s", "capacity.max: required: the ladder's highest step, a rate such as 100/s"),
            ("  start: 200/s\n  max: 200/s", "capacity.max: must be above capacity.start"),
            ("  start: 200/s\n  max: 100/s", "capacity.max: must be above capacity.start"),
            ("  start: 20/s\n  max: 200/s\n  resolution: 80%", "capacity.resolution: must be between 0.5% and 50%"),
            ("  start: 20/s\n  max: 200/s\n  resolution: 0.8", "capacity.resolution: must be between 0.5% and 50%"),
            ("  start: 20/s\n  max: 200/s\n  factor: 20", "capacity.factor: must be between 1.1 and 10"),
            ("  start: 20/s\n  max: 200/s\n  factor: 1", "capacity.factor: must be between 1.1 and 10"),
            ("  start: 20/s\n  max: 200/s\n  repeats: 0", "capacity.repeats: must be between 1 and 10, got 0"),
            ("  start: 20/s\n  max: 200/s\n  repeats: 11", "capacity.repeats: must be between 1 and 10, got 11"),
            ("  start: 20/s\n  max: 200/s\n  window: 0s", "capacity.window: must be longer than 0"),
            ("  start: 20/s\n  max: 200/s\n  window: 2h", "capacity.window: between 1s and 1h"),
            ("  start: 20/s\n  max: 200/s\n  warmup: 11m", "capacity.warmup: at most 10m"),
            ("  start: 20/s\n  max: 200/s\n  rate: 10/s", "capacity.rate: goes with vary: devices"),
            ("  vary: rate\n  start: 20/s\n  max: 200/s\n  rate: 10/s", "capacity.rate: goes with vary: devices"),
            ("  start: 20/s\n  max: 200/s\n  traffic: nope", "capacity.traffic: no traffic entry named 'nope' (there are plain, other)"),
            ("  vary: devices\n  start: 100/s\n  max: 1000", "capacity.start: expected a whole number"),
            ("  vary: devices\n  start: 100\n  max: 1000\n  rate: 0/s", "capacity.rate: must be between 0.1/s and 1000000/s"),
            ("  start: 0.01/s\n  max: 200/s", "capacity.start: a step's rate must be between 0.1/s and 1000000/s"),
            ("  vary: speed\n  start: 20/s\n  max: 200/s", "capacity.vary: 'speed' is not one of rate, devices"),
            ("  start: 20/s\n  max: 200/s\n  steps: 4", "capacity.steps: unknown key 'steps'"),
        ]
        for item in cases {
            let found = Self.issues(Self.with(item.yaml))
            #expect(found.count == 1, "\(item.yaml): \(found)")
            #expect(found.contains { $0.description.contains(item.message) }, "\(item.yaml): expected '\(item.message)' in \(found)")
        }
    }

    @Test("an issue names the file and the line of the key at fault")
    func positioned() throws {
        let message = try Self.only(Self.with("  start: 20/s\n  max: 200/s\n  repeats: 0"))
        // base has 9 lines, then `capacity:` on line 10; repeats' value is on line 13, column 12.
        #expect(message.hasPrefix("cap.yaml:13:12: capacity.repeats:"), "\(message)")
    }

    @Test("a capacity section needs a traffic entry")
    func needsTraffic() throws {
        let yaml = """
            name: cap
            fleet: { users: 10, platforms: { apns: 1 } }
            lifecycle: [login, register, connect, receive]
            traffic: []
            capacity: { start: 20/s, max: 200/s }
            """
        let message = try Self.only(yaml)
        #expect(message.contains("capacity: a capacity search needs a traffic entry whose rate it varies or keeps"), "\(message)")
        let none = Self.issues(yaml.replacingOccurrences(of: "traffic: []\n", with: ""))
        #expect(none.contains { $0.description.contains("capacity: a capacity search needs a traffic entry") }, "\(none)")
    }

    @Test("service-rate fault keys: pns service_rate and service_queue, backend_send_rate and backend_send_queue")
    func serviceRateFaults() throws {
        let yaml = Self.base + """

            faults:
              - { at: 0s, pns: { service_rate: 400/s, service_queue: 50 } }
              - { at: 1s, backend_send_rate: 300/s }
              - { at: 2s, pns: { service_rate: 6000/m }, backend_send_rate: 50/s, backend_send_queue: 7 }
            """
        let faults = try ScenarioLoader.parse(yaml, file: "cap.yaml").faults
        try #require(faults.count == 3)
        #expect(faults[0].at == .zero)
        #expect(faults[0].serviceRate == Rate(perSecond: 400))
        #expect(faults[0].serviceQueue == 50)
        #expect(faults[0].backendSendRate == nil)
        #expect(faults[1].at == .seconds(1))
        #expect(faults[1].backendSendRate == Rate(perSecond: 300))
        #expect(faults[1].backendSendQueue == nil)
        #expect(faults[1].serviceRate == nil)
        #expect(faults[2].serviceRate == Rate(perSecond: 100))
        #expect(faults[2].serviceQueue == nil)
        #expect(faults[2].backendSendRate == Rate(perSecond: 50))
        #expect(faults[2].backendSendQueue == 7)
    }

    @Test("service-rate fault keys out of place or out of range are refused")
    func invalidServiceRateFaults() throws {
        let queueAlone = Self.issues(Self.base + "\nfaults:\n  - { at: 0s, pns: { service_queue: 50 } }")
        #expect(queueAlone.contains { $0.description.contains("faults[0].pns.service_queue: service_queue goes with service_rate") }, "\(queueAlone)")
        let zero = try Self.only(Self.base + "\nfaults:\n  - { at: 0s, pns: { service_rate: 0/s } }")
        #expect(zero.contains("faults[0].pns.service_rate: a service rate must be between 0.001/s and 10000000/s, got 0/s"), "\(zero)")
        let notARate = try Self.only(Self.base + "\nfaults:\n  - { at: 0s, pns: { service_rate: fast } }")
        #expect(notARate.contains("faults[0].pns.service_rate: 'fast' is not a rate"), "\(notARate)")
        let queueZero = Self.issues(Self.base + "\nfaults:\n  - { at: 0s, pns: { service_rate: 10/s, service_queue: 0 } }")
        #expect(queueZero.contains { $0.description.contains("faults[0].pns.service_queue: must be between 1 and 10000000, got 0") }, "\(queueZero)")
        let backendQueueAlone = Self.issues(Self.base + "\nfaults:\n  - { at: 0s, backend_send_queue: 5 }")
        #expect(
            backendQueueAlone.contains { $0.description.contains("faults[0].backend_send_queue: backend_send_queue goes with backend_send_rate") },
            "\(backendQueueAlone)"
        )
        let backendZero = try Self.only(Self.base + "\nfaults:\n  - { at: 0s, backend_send_rate: 0/s }")
        #expect(backendZero.contains("faults[0].backend_send_rate: a service rate must be between 0.001/s and 10000000/s"), "\(backendZero)")
    }

    @Test("a rate step plays the chosen traffic entry at a constant rate for warm-up plus window, from the start of traffic")
    func rateStep() throws {
        let yaml = Self.with("  traffic: other\n  start: 20/s\n  max: 200/s\n  warmup: 2s\n  window: 8s")
        let scenario = try ScenarioLoader.parse(yaml, file: "cap.yaml")
        let step = scenario.capacityStep(123.5)
        #expect(step.traffic[1].profile == .constant(Rate(perSecond: 123.5), for: .seconds(10)))
        #expect(step.traffic[1].start == .zero)
        #expect(step.traffic[1].name == "other")
        // Everything else as written.
        #expect(step.traffic[0] == scenario.traffic[0])
        #expect(step.fleet == scenario.fleet)
        #expect(step.faults == scenario.faults)
        #expect(step.capacity == scenario.capacity)
        // No traffic named: the first entry.
        let first = try ScenarioLoader.parse(Self.with("  start: 20/s\n  max: 200/s\n  warmup: 0s\n  window: 5s"), file: "cap.yaml").capacityStep(40)
        #expect(first.traffic[0].profile == .constant(Rate(perSecond: 40), for: .seconds(5)))
        #expect(first.traffic[1] == scenario.traffic[1])
        // A scenario without a capacity section plays as written.
        let none = try ScenarioLoader.parse(Self.base, file: "cap.yaml")
        #expect(none.capacityStep(40) == none)
    }

    @Test("a devices step sizes the fleet (devices per user) and keeps the send rate")
    func devicesStep() throws {
        let kept = try ScenarioLoader.parse(
            Self.with("  vary: devices\n  traffic: other\n  start: 10\n  max: 1000\n  rate: 20/s\n  warmup: 1s\n  window: 4s"), file: "cap.yaml"
        )
        let step = kept.capacityStep(101)
        // Two devices per user: 50.5 users, rounded.
        #expect(step.fleet.users == 51)
        #expect(step.traffic[1].profile == .constant(Rate(perSecond: 20), for: .seconds(5)))
        #expect(step.traffic[1].start == .zero)
        #expect(kept.capacityStep(400).fleet.users == 200)
        #expect(kept.capacityStep(1).fleet.users == 1)
        // Without capacity.rate: the traffic entry's own rate.
        let own = try ScenarioLoader.parse(Self.with("  vary: devices\n  traffic: other\n  start: 10\n  max: 1000\n  warmup: 1s\n  window: 4s"), file: "cap.yaml")
        let ownStep = own.capacityStep(60)
        #expect(ownStep.fleet.users == 30)
        #expect(ownStep.traffic[1].profile == .constant(Rate(perSecond: 4), for: .seconds(5)))
    }
}
