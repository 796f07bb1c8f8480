import PushFleetCore

/// Values given beside a scenario file (the command line's `--seed`, `--hub`) that replace the
/// file's own. They are applied before the cross-checks, so the loader's rules judge them too.
public struct ScenarioOverrides: Sendable, Equatable {
    /// Any value: the command line checked it where it entered (a `UInt64`).
    public var seed: UInt64?
    /// `embedded.hub`.
    public var hub: Bool?

    public init(seed: UInt64? = nil, hub: Bool? = nil) {
        self.seed = seed
        self.hub = hub
    }

    func applied(to scenario: Scenario) -> Scenario {
        var scenario = scenario
        if let seed { scenario.seed = seed }
        if let hub { scenario.embedded.hub = hub }
        return scenario
    }
}
