import PushFleetCore

/// What the run plays, fixed when it starts: the scenario, its plan, the backend's API as the
/// scenario describes it, and the part of the plan this process plays.
final class RunSpec: Sendable {
    let scenario: Scenario
    let plan: FleetPlan
    /// The backend's API as the scenario describes it.
    let api: APIDescription
    let names: FleetNames
    /// What login gave each user.
    let users: UserValues
    /// Steps whose requests use what login gives.
    let stepsNeedingLogin: Set<APIStepKind>
    /// Each platform's device steps, in `Scenario.PlatformName.allCases` order.
    private let stepsByPlatform: [DeviceSteps]
    /// The part of the plan this process plays.
    let shard: Shard
    /// The run's trace identities (docs/tracing.md).
    let traces: TraceRoot
    /// In a shard, its devices' tokens; in shard 0, also every device's (empty otherwise).
    private let ownTokens: Set<String>
    private let planTokens: Set<String>

    init(scenario: Scenario, plan: FleetPlan, shard: Shard) {
        self.scenario = scenario
        self.plan = plan
        self.shard = shard
        self.traces = TraceRoot(run: plan.runID)
        // Only a shard needs to tell its devices' pushes from the others'; only shard 0 keeps
        // those of tokens of no device, so only it needs every token.
        self.ownTokens = shard.isWhole ? [] : Set(plan.devices.lazy.filter { shard.owns(device: $0.index) }.map(\.token))
        self.planTokens = shard.isWhole || shard.index != 0 ? [] : Set(plan.devices.lazy.map(\.token))
        let api = scenario.api ?? APIDescription(name: "none", register: APIStep(kind: .register, requests: []))
        self.api = api
        self.names = scenario.fleet.names
        self.users = UserValues(users: plan.users, slots: api.userVariables.count)
        self.stepsNeedingLogin = Set(
            api.steps.filter { step in
                step.allRequests.contains { request in
                    request.variables.contains { if case .stored(.user, _) = $0 { true } else { false } }
                }
            }.map(\.kind)
        )
        self.stepsByPlatform = DeviceSteps.byPlatform(api, scenario: scenario)
    }

    /// Random per run; in every nonce and device token, so nothing of another run is credited.
    var runID: String { plan.runID }

    /// The steps a device on `platform` makes, for it to hold.
    func deviceSteps(_ platform: Scenario.PlatformName) -> DeviceSteps {
        stepsByPlatform[Scenario.PlatformName.allCases.firstIndex(of: platform) ?? 0]
    }

    /// What of a push service report this process keeps: in a shard, its own devices' pushes,
    /// and in shard 0 also those of no device and the hub's, so the shards' tapes together
    /// hold every report once.
    func ownPart(of report: PushReport) -> PushReport {
        guard !shard.isWhole else { return report }
        var own = report
        own.hops = report.hops.filter { hop in
            ownTokens.contains(hop.token) || (shard.index == 0 && !planTokens.contains(hop.token))
        }
        if shard.index != 0 { own.hub = nil }
        return own
    }
}
