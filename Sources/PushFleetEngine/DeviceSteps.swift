import PushFleetCore

/// The steps every device of one platform makes, chosen from the api once when the run starts
/// (a step keyed by platform gives each platform its own requests). A device holds its
/// platform's and never chooses again, per request or per push.
final class DeviceSteps: Sendable {
    let lifecycle: DeviceLifecycle.Settings
    let fetch: [Scenario.Traffic.Kind: APIStep]

    init(lifecycle: DeviceLifecycle.Settings, fetch: [Scenario.Traffic.Kind: APIStep]) {
        self.lifecycle = lifecycle
        self.fetch = fetch
    }

    /// Each platform's steps, in `Scenario.PlatformName.allCases` order.
    static func byPlatform(_ api: APIDescription, scenario: Scenario) -> [DeviceSteps] {
        let steps = scenario.lifecycle
        return Scenario.PlatformName.allCases.map { platform in
            let register = steps.contains(.register) ? api.register.on(platform) : nil
            let lifecycle = DeviceLifecycle.Settings(
                login: steps.contains(.login) && api.login != nil, connect: steps.contains(.connect),
                register: register?.requests.isEmpty == false ? register : nil, unregister: api.unregister?.on(platform),
                probe: api.probe?.on(platform), deviceSlots: api.deviceVariables.count,
                connectAttempts: scenario.fleet.pushChannel == .multiplexed ? 1 : 3, connectTimeout: scenario.timeouts.connect
            )
            return DeviceSteps(lifecycle: lifecycle, fetch: api.fetch.compactMapValues { $0.on(platform) })
        }
    }
}
