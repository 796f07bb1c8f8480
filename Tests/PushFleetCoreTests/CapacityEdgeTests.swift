import PushFleetCore
import PushFleetScenario
import Testing

/// Edges of the capacity search and its section: whole devices that must climb, a step budget
/// that does not hide a stop, searches too long or too large to plan.
@Suite("Capacity edges")
struct CapacityEdgeTests {
    @Test("a devices ladder from 1 at factor 1.2 climbs by a device at least, and reaches its max")
    func smallDeviceLadderClimbs() {
        var capacity = Scenario.Capacity(vary: .devices, start: 1, maximum: 12)
        capacity.factor = 1.2
        capacity.repeats = 1
        let (search, outcome) = CapacitySearchTests.play(capacity, verdict: CapacitySearchTests.target(.infinity))
        #expect(outcome == .notReached)
        let loads = search.records.map(\.load)
        #expect(loads.first == 1 && loads.last == 12)
        #expect(zip(loads, loads.dropFirst()).allSatisfy { $0 < $1 }, "\(loads)")
        #expect(loads.allSatisfy { $0 == $0.rounded() })
    }

    @Test("a misdelivery in the last step the budget allows ends the search stopped, not out of steps")
    func stopBeatsTheBudget() {
        var capacity = Scenario.Capacity(vary: .rate, start: 1, maximum: 1_000_000)
        capacity.factor = 1.1
        capacity.repeats = 1
        var search = CapacitySearch(capacity)
        for index in 0..<Scenario.Capacity.maximumSteps {
            guard case .run = search.next() else {
                Issue.record("the search ended before its budget at step \(index)")
                return
            }
            search.record(index == Scenario.Capacity.maximumSteps - 1 ? .stop : .pass)
        }
        #expect(search.next() == .finished(.stopped))

        // A search that only passes uses up its budget.
        var passing = CapacitySearch(capacity)
        while case .run = passing.next() { passing.record(.pass) }
        #expect(passing.next() == .finished(.outOfSteps))
        #expect(passing.records.count == Scenario.Capacity.maximumSteps)
    }

    @Test("the loader refuses a search that could need more steps than a search makes, or plan more sends than a sender may")
    func tooLongOrTooLarge() {
        let long = CapacityScenarioTests.issues(CapacityScenarioTests.with("  start: 10/s\n  max: 10000/s\n  factor: 1.1"))
        #expect(long.contains { $0.path == "capacity" && $0.message.contains("needs up to") && $0.message.contains("over the 60") }, "\(long)")

        let large = CapacityScenarioTests.issues(CapacityScenarioTests.with("  start: 1000/s\n  max: 1000000/s\n  warmup: 10m\n  window: 1h"))
        #expect(large.contains { $0.message.contains("would plan") && $0.message.contains("100000000") }, "\(large)")
    }

    @Test("a devices search takes the peak of its traffic's profile as its rate, not the rate it ramps down to")
    func devicesRateIsThePeak() throws {
        let yaml = """
            name: cap
            fleet: { users: 10, devices_per_user: 1, platforms: { apns: 1 } }
            lifecycle: [login, register, connect, receive]
            traffic:
              - name: plain
                kind: plain
                platforms: [apns]
                start_rate: 0/s
                stages: [{ duration: 5s, target: 40/s }, { duration: 5s, target: 0/s }]
            capacity: { vary: devices, start: 10, max: 80 }
            """
        let scenario = try ScenarioLoader.parse(yaml, file: "cap.yaml")
        #expect(scenario.capacityDevicesRate?.perSecond == 40)
        let step = scenario.capacityStep(40)
        #expect(step.traffic[0].profile.peakRate.perSecond == 40)
        #expect(step.fleet.users == 40)
    }
}
