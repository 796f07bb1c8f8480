public import PushFleetCore
import Yams

extension ScenarioLoader {
    /// The scenario's `api:`: a preset's name (`appbackend`, the default) or a description.
    /// - Parameter fleetPlatforms: the platforms the fleet has devices on, which a device step
    ///   keyed by platform must each name.
    static func readAPI(
        _ node: Node?, auth authNode: Node?, mode: Scenario.AuthMode, fleetPlatforms: [Scenario.PlatformName], _ r: NodeReader
    ) -> APIDescription? {
        if let node, node.mapping != nil {
            if let authNode {
                r.report(authNode, "auth", "auth chooses how the appbackend preset logs in; a described api says it itself (login, headers)")
            }
            var loader = APILoader(reader: r, prefix: "api.", fleetPlatforms: fleetPlatforms)
            return loader.read(node, name: "custom")
        }
        let name = node.flatMap { r.string($0, "api") } ?? "appbackend"
        guard APIPresets.names.contains(name) else {
            r.report(node, "api", "'\(name)' is not a preset (\(APIPresets.names.joined(separator: ", "))) or an api description",
                suggestion: closest(to: name, in: APIPresets.names))
            return nil
        }
        return preset(name, auth: mode)
    }

    /// A preset read from its text by the same loader as a scenario's `api:`.
    public static func preset(_ name: String, auth: Scenario.AuthMode = .basic) -> APIDescription? {
        try? loadPreset(name, auth: auth)
    }

    /// A preset, or its problems, warnings included (pushfleet's bug: the tests load every one).
    public static func loadPreset(_ name: String, auth: Scenario.AuthMode) throws(ScenarioIssues) -> APIDescription {
        let text = APIPresets.appBackend(auth: auth)
        let reader = NodeReader(file: "<preset \(name)>")
        let node: Node
        do {
            guard let composed = try Yams.compose(yaml: text) else { throw ScenarioIssues(issues: []) }
            node = composed
        } catch {
            throw ScenarioIssues(issues: [ScenarioIssue(file: reader.file, line: 1, column: 1, path: "", message: "\(error)")])
        }
        var loader = APILoader(reader: reader, prefix: "api.")
        let warnings = reader.warnings.map { ScenarioIssue(file: $0.file, line: $0.line, column: $0.column, path: $0.path, message: "warning: \($0.message)") }
        guard let description = loader.read(node, name: name), reader.issues.isEmpty, warnings.isEmpty else {
            throw ScenarioIssues(issues: reader.issues + warnings)
        }
        return description
    }
    /// What the description must have for what the scenario does.
    static func validateAPI(_ scenario: Scenario, node: (String) -> Node?, _ r: NodeReader) {
        guard let api = scenario.api else { return }
        let apiNode = node("api")
        let steps = scenario.lifecycle
        if steps.contains(.register) && api.register.allRequests.isEmpty {
            r.report(apiNode, "api.register", "required: the lifecycle registers devices (or drop register from lifecycle)")
        }
        for (index, traffic) in scenario.traffic.enumerated() {
            let item = node("traffic")?.sequence?[index]
            guard let send = api.send[traffic.kind] else {
                r.report(item, "traffic[\(index)].kind", "the api has no send.\(traffic.kind.rawValue) step")
                continue
            }
            let fetchStep: Scenario.LifecycleStep? = traffic.kind == .secure ? .fetchSecure : traffic.kind == .rich ? .fetchRich : nil
            if let fetchStep, steps.contains(fetchStep), api.fetch[traffic.kind] == nil {
                r.report(item, "traffic[\(index)].kind", "\(fetchStep.rawValue) needs the api's fetch.\(traffic.kind.rawValue) step")
            }
            let usesPlatform = send.allRequests.contains { request in
                request.variables.contains(.builtin(.platform))
            }
            if usesPlatform && !send.callsPerPlatform {
                r.report(apiNode, "api.send.\(traffic.kind.rawValue)", "{{platform}} needs per_platform: true (one call per platform) or requests per platform")
            }
            // A call to a platform the fleet has no device on reaches no one: only the fleet's count.
            let missing = traffic.platforms.filter { scenario.fleet.platforms[$0] != nil && send.on($0) == nil }
            if send.isPlatformKeyed && !missing.isEmpty {
                let kind = traffic.kind.rawValue
                r.report(
                    item, "traffic[\(index)].platforms",
                    "\(traffic.name) sends to the fleet's \(APILoader.list(missing)) devices, but api.send.\(kind) has requests only for \(APILoader.list(send.platforms)): add \(APILoader.list(missing)) there, or list the platforms this sender targets"
                )
            }
        }
        if scenario.fleet.departure != nil && api.unregister == nil {
            r.report(node("fleet"), "fleet.departure", "departing devices unregister: the api needs an unregister step")
        }
    }

}
