import Foundation
import PushFleetCore
import PushFleetScenario
import Testing

/// Values given beside the file (`--seed`, `--hub`) are judged by the loader's own rules.
@Suite("Scenario validation: overrides")
struct ScenarioValidationOverrideTests {
    static let embedded = """
        name: ok
        seed: 7
        fleet:
          users: 10
        lifecycle: [login, register, connect, receive, fetch_secure]
        traffic:
          - { kind: secure, rate: 10/s, duration: 1s }
        """

    static let external = "name: ext\ntarget: { backend: http://127.0.0.1:9, pns: http://127.0.0.1:9 }\nfleet: { users: 1 }\ntraffic: []\n"

    static func issues(_ yaml: String, overrides: ScenarioOverrides = .init()) -> [ScenarioIssue] {
        do {
            _ = try ScenarioLoader.parse(yaml, file: "ext.yaml", overrides: overrides)
            return []
        } catch {
            return error.issues
        }
    }

    @Test("--hub against an external backend is refused by the loader's rule, which names the flag")
    func hubOnExternalTarget() {
        #expect(Self.issues(Self.external).isEmpty)
        let flagged = Self.issues(Self.external, overrides: ScenarioOverrides(hub: true))
        #expect(flagged.map(\.description) == [
            "ext.yaml:2:9: embedded.hub: the hub is the embedded backend's way to send; the target is an external backend (--hub needs the embedded target)"
        ])
        // The same value from the file: the same rule, at the file's key, without the flag.
        let written = Self.issues(Self.external + "embedded: { hub: true }\n")
        #expect(written.map(\.description) == [
            "ext.yaml:5:11: embedded.hub: the hub is the embedded backend's way to send; the target is an external backend"
        ])
        // An override of false lifts the file's value before the rule runs.
        #expect(Self.issues(Self.external + "embedded: { hub: true }\n", overrides: ScenarioOverrides(hub: false)).isEmpty)
    }

    @Test("--hub on the embedded target turns the hub on")
    func hubOnEmbeddedTarget() throws {
        #expect(try ScenarioLoader.parse(Self.embedded, file: "ok.yaml").embedded.hub == false)
        #expect(try ScenarioLoader.parse(Self.embedded, file: "ok.yaml", overrides: ScenarioOverrides(hub: true)).embedded.hub)
    }

    @Test("a seed override replaces the file's seed, and so the fleet planned from it")
    func seed() throws {
        let written = try ScenarioLoader.parse(Self.embedded, file: "ok.yaml")
        let overridden = try ScenarioLoader.parse(Self.embedded, file: "ok.yaml", overrides: ScenarioOverrides(seed: 8))
        let rewritten = try ScenarioLoader.parse(Self.embedded.replacingOccurrences(of: "seed: 7", with: "seed: 8"), file: "ok.yaml")
        #expect(written.seed == 7 && overridden.seed == 8)
        let tokens = { (scenario: Scenario) in FleetPlan(scenario: scenario, runID: "0123456789ab").devices.map(\.token) }
        #expect(tokens(overridden) != tokens(written))
        #expect(tokens(overridden) == tokens(rewritten))
    }
}
