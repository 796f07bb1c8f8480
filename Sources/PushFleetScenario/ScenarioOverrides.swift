import PushFleetCore

/// Values given beside a scenario file (the command line's `--seed`, `--hub`) that replace the
/// file's own. They are applied before the cross-checks, so the loader's rules judge them too.
public struct ScenarioOverrides: Sendable, Equatable {
    /// Any value: the command line checked it where it entered (a `UInt64`).
    public var seed: UInt64?
    /// `embedded.hub`.
    public var hub: Bool?
    /// An external backend and push service to play against instead of the file's target
    /// (`--backend`, `--push-service`): the shards of a run share one system.
    public var target: (backend: String, pushService: String)?
    /// `--only-fault N`: of `network.faults`, the Nth alone (from 1), to replay a failing window.
    public var onlyFault: Int?

    public init(seed: UInt64? = nil, hub: Bool? = nil, target: (backend: String, pushService: String)? = nil, onlyFault: Int? = nil) {
        self.seed = seed
        self.hub = hub
        self.target = target
        self.onlyFault = onlyFault
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.seed == b.seed && a.hub == b.hub && a.target?.backend == b.target?.backend && a.target?.pushService == b.target?.pushService
            && a.onlyFault == b.onlyFault
    }

    /// Why a target given beside the file cannot be one; nil when it can.
    public static func problem(withTarget backend: String, _ pushService: String) -> String? {
        for (flag, url) in [("--backend", backend), ("--push-service", pushService)] where !ScenarioLoader.isHTTPURL(url) {
            return "\(flag) \(url): give an http:// or https:// URL with a host"
        }
        return nil
    }

    func applied(to scenario: Scenario) -> Scenario {
        var scenario = scenario
        if let seed { scenario.seed = seed }
        if let hub { scenario.embedded.hub = hub }
        // Out of range is the cross-checks' to report; the faults stay as they are until then.
        if let onlyFault, scenario.network.faults.indices.contains(onlyFault - 1) {
            scenario.network.faults = [scenario.network.faults[onlyFault - 1]]
        }
        if let target {
            scenario.target = .external(backend: target.backend, pushService: .url(target.pushService))
            // The file's embedded system is not started: what describes it does not apply
            // (`pushfleet shards --local` gives it to the `serve` it starts instead).
            scenario.embedded.hub = false
            scenario.embedded.store = .memory
            scenario.embedded.tls = nil
        }
        return scenario
    }
}
