import Foundation
import PushFleetCore
import PushFleetScenario
import Testing

/// Steps keyed by platform: a backend with one endpoint, and one body, per platform.
@Suite("API steps per platform")
struct APIPlatformStepsTests {
    struct Values: TemplateValues {
        var table: [VariableRef: APIValue]
        func value(of ref: VariableRef) -> APIValue? { table[ref] }
    }

    static func scenario(platforms: String = "{ apns: 1, fcm: 1, wns: 1 }", traffic: String = "[{ kind: plain, rate: 1/s, duration: 1s }]", _ api: String) -> String {
        """
        name: platforms
        fleet: { users: 3, platforms: \(platforms) }
        lifecycle: [register, connect, receive, fetch_secure]
        traffic: \(traffic)
        api:
        \(api.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
        """
    }

    static let register = """
        register:
          apns: { method: POST, path: /devices/apns, json: { token: "{{device.push_token}}" }, extract: { device: /id } }
          fcm: { method: POST, path: /devices/fcm, json: { registration_id: "{{device.push_token}}" }, extract: { device: /id } }
          wns:
            - { name: channel, method: POST, path: /devices/wns, json: { channel: "{{device.push_token}}" }, extract: { device: /id } }
            - { name: activate, method: PUT, path: "/devices/wns/{{device}}" }
        unregister: { method: DELETE, path: "/devices/{{device}}" }
        send:
          plain: { method: POST, path: /p, json: { to: "{{to}}", m: "{{message}}" } }
        """

    static func issues(_ yaml: String) -> [String] {
        ScenarioValidationTests.issuesOf(yaml, file: "api.yaml").map(\.description)
    }

    @Test("each platform's requests are its own, compiled once: path, body, request count and metric names")
    func register() throws {
        let api = try #require(try ScenarioLoader.parse(Self.scenario(Self.register), file: "api.yaml").api)
        #expect(api.register.isPlatformKeyed && api.register.requests.isEmpty)
        let device = Values(table: [.builtin(.devicePushToken): .text("tok")])
        let apns = try #require(api.register.on(.apns))
        #expect(apns.requests.count == 1)
        #expect(try apns.requests[0].render(device).get().body == #"{"token":"tok"}"#)
        let fcm = try #require(api.register.on(.fcm))
        #expect(try fcm.requests[0].render(device).get().target == "/devices/fcm")
        #expect(try fcm.requests[0].render(device).get().body == #"{"registration_id":"tok"}"#)
        let wns = try #require(api.register.on(.wns))
        #expect(wns.requests.map(\.metric) == ["http.register.channel", "http.register.activate"])
        // One device slot for the value every platform extracts.
        #expect(api.deviceVariables == ["device"])
        #expect(api.metricNames == ["http.register", "http.register.channel", "http.register.activate", "http.unregister"])
        // A shared step is the same for every platform.
        #expect(api.unregister?.on(.fcm) == api.unregister)
    }

    @Test("a platform the fleet uses and a device step does not name is an error saying which; one it does not use may be left out")
    func missingPlatform() throws {
        let apnsOnly = Self.register.replacingOccurrences(of: "  fcm: {", with: "  # fcm: {")
        let found = Self.issues(Self.scenario(apnsOnly))
        #expect(
            found == [
                "api.yaml:7:5: api.register: the fleet has apns, fcm and wns devices; register has no requests for fcm (a platform the fleet does not use may be left out)"
            ], "\(found)"
        )
        #expect(Self.issues(Self.scenario(platforms: "{ apns: 1, wns: 2 }", apnsOnly)).isEmpty)
        let fetch = Self.issues(
            Self.scenario(platforms: "{ apns: 1, fcm: 1 }", traffic: "[{ kind: secure, rate: 1/s, duration: 1s }]", Self.register + "\n  secure: { method: POST, path: /s }\nfetch:\n  secure:\n    apns: { path: \"/c/{{id}}\", content: /payload }")
        )
        #expect(fetch.count == 1 && fetch[0].contains("api.fetch.secure: the fleet has apns and fcm devices; fetch.secure has no requests for fcm"), "\(fetch)")
    }

    @Test("a value only some platforms' requests extract is an error where another platform's device would use it, naming the platforms")
    func partialValues() {
        let partial = Self.register.replacingOccurrences(
            of: #"fcm: { method: POST, path: /devices/fcm, json: { registration_id: "{{device.push_token}}" }, extract: { device: /id } }"#,
            with: #"fcm: { method: POST, path: /devices/fcm, json: { registration_id: "{{device.push_token}}" } }"#
        )
        let found = Self.issues(Self.scenario(partial))
        #expect(found == ["api.yaml:12:15: api.unregister: {{device}} has no value on fcm: register extracts it only in its apns and wns requests"], "\(found)")
        // Left out where the fleet has no fcm device, it is no error.
        #expect(Self.issues(Self.scenario(platforms: "{ apns: 1, wns: 1 }", partial)).isEmpty)
        // Within a step: a local value one platform extracts, another platform's request uses.
        let local = Self.register + "\nprobe:\n  apns: [{ method: POST, path: /probe, extract: { pid: /id } }, { method: PUT, path: \"/probe/{{pid}}\" }]\n  fcm: [{ method: PUT, path: \"/probe/{{pid}}\" }]\n  wns: { method: POST, path: /probe }"
        let within = Self.issues(Self.scenario(local))
        #expect(within.count == 1 && within[0].contains("api.probe.fcm[0]: {{pid}} has no value on fcm: probe extracts it only in its apns requests"), "\(within)")
    }

    @Test("every send kind may call once per platform: per_platform, or requests per platform, each with its platform's requests")
    func sends() throws {
        let api = """
            register: { method: POST, path: /d }
            send:
              secure: { per_platform: true, method: POST, path: "/s/{{platform}}", json: "{{message}}", content_id: /id }
              rich:
                apns: { method: POST, path: /r/ios, json: { m: "{{message}}", p: "{{platform}}" }, content_id: /rich_id }
                fcm: { requests: [{ method: POST, path: /r/android, json: "{{image}}", content_id: /name }] }
            fetch:
              secure: { path: "/c/{{id}}" }
            """
        let traffic = "[{ kind: secure, rate: 1/s, duration: 1s }, { kind: rich, platforms: [apns, fcm], rate: 1/s, duration: 1s }]"
        let scenario = try ScenarioLoader.parse(Self.scenario(platforms: "{ apns: 1, fcm: 1 }", traffic: traffic, api), file: "api.yaml")
        let secure = try #require(scenario.api?.send[.secure])
        #expect(secure.callsPerPlatform && !secure.isPlatformKeyed && secure.contentID != nil)
        let rich = try #require(scenario.api?.send[.rich])
        #expect(rich.callsPerPlatform && rich.platforms == [.apns, .fcm])
        #expect(rich.on(.fcm)?.requests[0].path.source == "/r/android" && rich.on(.wns) == nil)
        #expect(rich.on(.apns)?.contentID == rich.contentID && rich.contentID != nil)
        #expect(scenario.targetedPlatforms(of: scenario.traffic[1]) == [.apns, .fcm])
        #expect(scenario.targetedPlatforms(of: scenario.traffic[0]) == Scenario.PlatformName.allCases)

        // A sender that reaches the fleet's fcm devices needs fcm's requests.
        let narrow = Self.issues(
            Self.scenario(platforms: "{ apns: 1, fcm: 1 }", traffic: "[{ kind: rich, rate: 1/s, duration: 1s }]", api.replacingOccurrences(of: "    fcm: { requests", with: "    wns: { requests"))
        )
        #expect(
            narrow.count == 1
                && narrow[0].contains("traffic[0].platforms: rich-1 sends to the fleet's fcm devices, but api.send.rich has requests only for apns and wns"),
            "\(narrow)"
        )
        // {{platform}} needs one call per platform.
        let shared = Self.issues(Self.scenario(platforms: "{ apns: 1 }", traffic: "[{ kind: secure, rate: 1/s, duration: 1s }]", api.replacingOccurrences(of: "per_platform: true, ", with: "")))
        #expect(shared.count == 1 && shared[0].contains("{{platform}} needs per_platform: true (one call per platform) or requests per platform"), "\(shared)")
    }

    @Test("keys beside the platforms, platforms nested, login per platform and per_platform in a keyed send are errors, never a crash")
    func badForms() {
        let found = Self.issues(
            Self.scenario(
                platforms: "{ apns: 1 }",
                """
                login: { apns: { method: POST, path: /login } }
                register:
                  apns: { method: POST, path: /d }
                  method: POST
                unregister:
                  apns: { fcm: { method: DELETE, path: /d } }
                send:
                  plain:
                    apns: { per_platform: true, method: POST, path: /p }
                    fmc: { method: POST, path: /p }
                """
            )
        )
        let expected = [
            "api.login: login is the user's, made once for all of a user's devices: one request, not one per platform",
            "api.register.method: a step keyed by platform has only apns, fcm, wns, webpush, each with its own requests; 'method' belongs inside them",
            "api.unregister.apns: a platform's requests are one request, a list or {requests: [...]}, not keyed by platform again",
            "api.send.plain.apns.per_platform: a send keyed by platform makes one call per targeted platform already; leave per_platform out",
            "api.send.plain.fmc: a step keyed by platform has only apns, fcm, wns, webpush, each with its own requests; 'fmc' belongs inside them (did you mean 'fcm'?)",
        ]
        for message in expected { #expect(found.contains { $0.contains(message) }, "\(message)\n\(found.joined(separator: "\n"))") }
    }
}
