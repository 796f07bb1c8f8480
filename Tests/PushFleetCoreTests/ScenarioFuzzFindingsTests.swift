import Foundation
import PushFleetCore
import PushFleetScenario
import Testing

/// What the fuzzers (Fuzz/, docs/testing.md) found in scenario files and the parsers under them,
/// one test each; the servers' findings and the corpus replay are with the server and CLI tests.
@Suite("Fuzz findings in scenarios")
struct ScenarioFuzzFindingsTests {
    static func scenario(_ yaml: String) throws(ScenarioIssues) -> Scenario {
        try ScenarioLoader.parse(yaml, file: "finding.yaml")
    }

    @Test("a rate left empty is an issue at its position, not a crash (corpus: finding-empty-rate, FuzzScenario)")
    func emptyRate() throws {
        for rate in ["", "\"\"", "\"/\"", "\" / \""] {
            var issues: [ScenarioIssue] = []
            do { _ = try Self.scenario("name: e\nfleet: { users: 2 }\ntraffic:\n  - kind: plain\n    rate: \(rate)\n    duration: 1s\n") } catch {
                issues = error.issues
            }
            #expect(issues.count == 1 && issues[0].path == "traffic[0].rate" && issues[0].line == 5, "\(rate): \(issues)")
        }
        #expect(throws: Rate.ParseError.self) { try Rate(parsing: "") }
    }

    @Test("a threshold whose bound is infinite or not a number, a rule that could never fail, is refused (corpus: finding-infinite-threshold-bound, FuzzParsers)")
    func nonFiniteThresholdBound() throws {
        for expression in ["max < 1e3084", "p(99) < 1e308ms", "count != nan", "avg > -inf"] {
            #expect(throws: Threshold.ParseError.self, "\(expression)") { try Threshold(metric: "delivery.latency", expression: expression) }
        }
        var issues: [ScenarioIssue] = []
        do { _ = try Self.scenario("name: t\nfleet: { users: 1 }\nthresholds:\n  delivery.latency: [\"p(99) < 1e400ms\"]\n") } catch { issues = error.issues }
        #expect(issues.map(\.description) == ["finding.yaml:4:22: thresholds.delivery.latency: '1e400ms' in 'p(99) < 1e400ms' is not a finite number"])
        #expect(try Threshold(metric: "delivery.latency", expression: "p(99) < 250ms").bound == 250e6)
    }

    @Test("a sender planning more sends than a run can hold the schedule of is refused, not run out of memory")
    func tooManySends() throws {
        var issues: [ScenarioIssue] = []
        do {
            _ = try Self.scenario("name: t\nfleet: { users: 1 }\ntraffic:\n  - { kind: plain, rate: 1000000/s, duration: 1000h }\n")
        } catch { issues = error.issues }
        #expect(issues.map(\.description) == [
            "finding.yaml:4:5: traffic[0]: plans about 3.6e+12 sends; a sender may plan at most 100000000 (rate × duration)"
        ])
        _ = try Self.scenario("name: t\nfleet: { users: 1 }\ntraffic:\n  - { kind: plain, rate: 1000/s, duration: 24h }\n")
    }

    @Test("a fleet arriving too slowly for nanoseconds to count is planned at the end of time, not a crash (corpus: tiny-rates)")
    func tinyArrivalRate() throws {
        let scenario = try Self.scenario("name: slow\nfleet: { users: 3, arrival: { rate: 0.0000000001/s } }\n")
        let plan = FleetPlan(scenario: scenario)
        #expect(plan.devices.count == 3 && plan.devices.allSatisfy { $0.arrival == .max })
    }

    @Test("stages longer together than nanoseconds can count give a saturated schedule, not a crash (corpus: stages-past-int64)")
    func stagesPastInt64() throws {
        let scenario = try Self.scenario(
            """
            name: long
            fleet: { users: 2, arrival: { start_rate: 0/s, stages: [ { duration: 106751d, target: 0/s }, { duration: 106751d, target: 1/s } ] } }
            traffic:
              - { kind: plain, stages: [ { duration: 106751d, target: 0/s }, { duration: 106751d, target: 0.00001/s } ] }
            """
        )
        #expect(scenario.traffic[0].profile.totalDuration.nanoseconds == .max)
        #expect(scenario.traffic[0].profile.instants(limit: 2) == [.max, .max])
        #expect(FleetPlan(scenario: scenario).devices.allSatisfy { $0.arrival == .max })
    }

    @Test("a fleet too large to plan in memory is refused where its size is given (corpus: huge-numbers)")
    func fleetTooLarge() throws {
        var issues: [ScenarioIssue] = []
        do {
            _ = try Self.scenario("name: huge\nfleet:\n  users: 10000000\n  devices_per_user: { min: 1, max: 100 }\n")
        } catch {
            issues = error.issues
        }
        #expect(issues.map(\.description) == [
            "finding.yaml:4:21: fleet.devices_per_user: a fleet may have at most 10000000 devices (users × devices per user), got up to 1000000000"
        ])
        _ = try Self.scenario("name: big\nfleet: { users: 10000000 }\n")
    }

    @Test("nested YAML aliases in a mapping key are refused before the composer expands them (corpus: alias-bomb-key)")
    func aliasBomb() throws {
        var lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for level in 1...8 { lines.append("a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ") + "]") }
        let yaml = (lines + ["name: x", "fleet: { users: 1 }", "thresholds:", "  ? *a8", "  : 1"]).joined(separator: "\n")
        let started = ContinuousClock.now
        var issues: [ScenarioIssue] = []
        do { _ = try Self.scenario(yaml) } catch { issues = error.issues }
        // Expanded, the bomb is 10^8 nodes: minutes and gigabytes. The bound only catches that.
        #expect(ContinuousClock.now - started < .seconds(60))
        #expect(issues.map(\.description) == ["finding.yaml:3:40: (document): more than 16 YAML aliases (*name); a scenario file needs few"])
        // A few aliases, as people use them to repeat a block, still load.
        let reused = try Self.scenario("name: r\nfleet: { users: 2 }\ntraffic: [ &t { kind: plain, rate: 1/s, duration: 1s }, *t ]\n")
        #expect(reused.traffic.count == 2)
    }


    @Test("a registration lifetime the backend cannot add to a wall-clock instant is refused where it is given")
    func registrationLifetime() throws {
        var issues: [ScenarioIssue] = []
        do { _ = try Self.scenario("name: t\nfleet: { users: 1 }\nembedded: { registration_ttl: 100000d }\n") } catch { issues = error.issues }
        #expect(issues.map(\.description) == ["finding.yaml:3:31: embedded.registration_ttl: must be between 1s and 3650d"])
        #expect(try Self.scenario("name: t\nfleet: { users: 1 }\nembedded: { registration_ttl: 3650d }\n").embedded.registrationTTL == .seconds(3650 * 86_400))
    }
}
