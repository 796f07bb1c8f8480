import Foundation
import PushFleetCore

/// `pushfleet validate --explain`: the requests each device and sender will make, rendered with
/// example values, so a description can be checked by eye before anything runs.
enum APIExplain {
    static let run = "0123456789ab"

    struct Examples: TemplateValues {
        var builtins: [BuiltinVariable: String]
        var stored: [VariableRef: String]

        func value(of ref: VariableRef) -> APIValue? {
            switch ref {
            case .builtin(let builtin): builtins[builtin].map { .text($0) }
            case .stored: stored[ref].map { .text($0) }
            }
        }
    }

    static func text(_ scenario: Scenario, file: String) -> String {
        guard let api = scenario.api else { return "\(file): no api description\n" }
        let plan = FleetPlan(scenario: scenario, runID: run)
        let names = scenario.fleet.names
        let users = scenario.fleet.users
        var out = "\(file): api \(api.name) — the requests of one device and of a sender, with example values\n"
        var stored: [VariableRef: String] = [:]
        // Placeholders that survive percent-encoding as they are.
        for (slot, name) in api.userVariables.enumerated() { stored[.stored(.user, slot: slot)] = "LOGIN.\(name)" }
        for (slot, name) in api.deviceVariables.enumerated() { stored[.stored(.device, slot: slot)] = "REGISTER.\(name)" }
        let pushService = "http://127.0.0.1:8090"
        for platform in Scenario.PlatformName.allCases where scenario.fleet.platforms[platform] != nil {
            guard let device = plan.devices.first(where: { $0.platform == platform }) else { continue }
            let token = api.receive.token(platform) == .channelURL ? "\(pushService)/wns/\(device.token)" : device.token
            var builtins: [BuiltinVariable: String] = [
                .user: names.user(device.user), .password: names.password(device.user),
                .basicAuth: "Basic " + Data("\(names.user(device.user)):\(names.password(device.user))".utf8).base64EncodedString(), .run: run, .devicePushToken: token,
                .devicePlatform: api.platformName(platform), .deviceID: "0f1e2d3c4b5a6978", .victim: names.user((device.user + 1) % users),
                .id: "PUSH.id",
            ]
            out += "\n== a device on \(platform.rawValue) (\(names.user(device.user)), token as the backend sees it: \(api.receive.token(platform).rawValue))\n"
            for described in [api.login, api.register, api.unregister, api.probe] + [api.fetch[.secure], api.fetch[.rich]] {
                guard let described, let step = described.on(platform), !step.requests.isEmpty else { continue }
                out += explain(step, Examples(builtins: builtins, stored: stored), note: described.isPlatformKeyed ? "its \(platform.rawValue) requests" : nil)
            }
            builtins[.id] = nil
            let layout = api.receive.layout(platform)
            out += "  receive: rich id at \(places(layout.richID)), its message at \(places(layout.richMessage)); secure id at \(places(layout.secureID)); nonce at \(layout.nonce.isEmpty ? "anywhere in the body" : places(layout.nonce))\n"
        }
        let sender = names.user(0)
        let recipient = names.user(1 % users)
        out += "\n== a sender (\(sender) to \(recipient))\n"
        for kind in Scenario.Traffic.Kind.allCases {
            guard let step = api.send[kind] else { continue }
            let message = kind == .secure ? PushContent.securePayload(send: 1, recipient: recipient, run: run) : PushContent.nonceText(1, run: run)
            var builtins: [BuiltinVariable: String] = [
                .user: sender, .password: names.password(0), .basicAuth: "Basic " + Data("\(sender):\(names.password(0))".utf8).base64EncodedString(), .run: run,
                .to: recipient, .message: message,
            ]
            if kind == .rich {
                builtins[.image] = Data(PushContent.securePayload(send: 1, recipient: recipient, run: run).utf8).base64EncodedString()
                builtins[.imageType] = "image/png"
            }
            if step.isPlatformKeyed {
                for platform in step.platforms {
                    guard let variant = step.on(platform) else { continue }
                    builtins[.platform] = api.platformName(platform)
                    out += explain(variant, Examples(builtins: builtins, stored: stored), note: "one call per targeted platform; its \(platform.rawValue) requests")
                }
                continue
            }
            if step.perPlatform { builtins[.platform] = api.platformName(.apns) }
            out += explain(step, Examples(builtins: builtins, stored: stored), note: step.perPlatform ? "one call per targeted platform; apns shown" : nil)
        }
        return out
    }

    static func places(_ locations: [PushLocation]) -> String {
        locations.isEmpty ? "—" : locations.map(\.description).joined(separator: " or ")
    }

    static func explain(_ step: APIStep, _ base: Examples, note: String? = nil) -> String {
        var values = base
        for (slot, name) in step.localVariables.enumerated() { values.stored[.stored(.local, slot: slot)] = "\(String(describing: step.kind).uppercased()).\(name)" }
        var out = "  \(step.kind)\(note.map { " (\($0))" } ?? "")\n"
        for (index, request) in step.requests.enumerated() {
            let number = step.requests.count > 1 ? "\(index + 1). " : ""
            switch request.render(values) {
            case .success(let rendered):
                out += "    \(number)\(rendered.method) \(rendered.target)\n"
                for header in rendered.headers { out += "        \(header.name): \(header.value)\n" }
                if let type = rendered.contentType { out += "        Content-Type: \(type)\n" }
                if let body = rendered.body { out += "        \(body)\n" }
            case .failure(let error):
                out += "    \(number)\(request.method) \(request.path.source) — \(error.description)\n"
            }
            var notes = ["expect \(request.expect)"]
            if !request.skipWhenKnown.isEmpty { notes.append("skipped while its values are known") }
            if let timeout = request.timeout { notes.append("timeout \(DurationText.format(timeout))") }
            for extraction in request.extract {
                notes.append("\(extraction.name) ← \(extraction.sources.map(\.description).joined(separator: " or "))\(extraction.optional ? " (optional)" : "")")
            }
            if let metric = request.metric { notes.append("metric \(metric)") }
            out += "        [\(notes.joined(separator: "; "))]\n"
            for rule in request.rules {
                let forget = rule.forget.isEmpty ? "" : "forget \(rule.forget.map { values.stored[$0] ?? "?" }.joined(separator: ", ")), "
                out += "        on \(rule.statuses): \(forget)then \(rule.then.rawValue)\(rule.times == 1 ? " (once)" : " (\(rule.times) times)")\n"
            }
        }
        if case .fetch = step.kind { out += "        [content ← \(step.content)]\n" }
        return out
    }
}
