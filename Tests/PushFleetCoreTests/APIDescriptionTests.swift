import Foundation
import PushFleetCore
import PushFleetLedger
import PushFleetScenario
import Testing

@Suite("API descriptions")
struct APIDescriptionTests {
    @Test("the presets load without a problem, with Basic and with token auth")
    func presetsLoad() throws {
        for auth in Scenario.AuthMode.allCases {
            do {
                let api = try ScenarioLoader.loadPreset("appbackend", auth: auth)
                #expect(api.register.requests.map(\.metric) == ["http.register.post", "http.register.put"])
                #expect((api.login != nil) == (auth == .token))
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    /// Values for rendering without a run.
    struct Values: TemplateValues {
        var table: [VariableRef: APIValue]
        func value(of ref: VariableRef) -> APIValue? { table[ref] }
    }

    static func scenario(_ api: String, traffic: String = "[{ kind: plain, rate: 1/s, duration: 1s }]", extra: String = "") -> String {
        """
        name: custom
        fleet: { users: 3 }
        lifecycle: [login, register, connect, receive]
        traffic: \(traffic)
        \(extra)
        api:
        \(api.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }.joined(separator: "\n"))
        """
    }

    static let minimal = """
        login: { method: POST, path: /login, json: { user: "{{user}}", pass: "{{password}}" }, extract: { token: /token } }
        headers: { Authorization: "Token {{token}}" }
        on: { 401: { then: login } }
        register:
          method: POST
          path: /devices/{{device.platform}}/
          json: { registration_id: "{{device.push_token}}", active: true, n: 5 }
          expect: [200, 201]
          extract: { device_pk: /id }
        unregister: { method: DELETE, path: "/devices/{{device.platform}}/{{device_pk}}/" }
        send:
          plain: { method: POST, path: /notify, query: { to: "{{to}}", tag: "a&b" }, json: { to: "{{to}}", text: "hi {{message}}" } }
        """

    @Test("values are encoded for where they go: a path segment, a query value, a JSON string, typed JSON")
    func rendering() throws {
        let scenario = try ScenarioLoader.parse(Self.scenario(Self.minimal), file: "custom.yaml")
        let api = try #require(scenario.api)
        let send = try #require(api.send[.plain]?.requests.first)
        let values = Values(table: [
            .builtin(.to): .text("bob&x=1/\"q\""), .builtin(.message): .text("pf:abc:1"), .stored(.user, slot: 0): .text("t0k"),
        ])
        let rendered = try send.render(values).get()
        #expect(rendered.target == "/notify?to=bob%26x%3D1%2F%22q%22&tag=a%26b")
        #expect(rendered.body == #"{"to":"bob&x=1/\"q\"","text":"hi pf:abc:1"}"#)
        #expect(rendered.headers.map { "\($0.name): \($0.value)" } == ["Authorization: Token t0k"])
        let register = api.register.requests[0]
        let device = Values(table: [
            .builtin(.devicePlatform): .text("a/b"), .builtin(.devicePushToken): .text("tok"), .stored(.user, slot: 0): .text("t"),
        ])
        let registered = try register.render(device).get()
        #expect(registered.target == "/devices/a%2Fb/")
        #expect(registered.body == #"{"registration_id":"tok","active":true,"n":5}"#)
        // Login does not send the header whose value it has yet to get.
        #expect(try api.login!.requests[0].render(Values(table: [.builtin(.user): .text("u"), .builtin(.password): .text("p")])).get().headers.isEmpty)
        // A typed value goes back in its own type; a missing one is named.
        let unregister = api.unregister!.requests[0]
        #expect(try unregister.render(Values(table: [.builtin(.devicePlatform): .text("gcm"), .stored(.device, slot: 0): .json("17"), .stored(.user, slot: 0): .text("t")])).get().target == "/devices/gcm/17/")
        #expect(throws: RenderError.self) { try unregister.render(Values(table: [.builtin(.devicePlatform): .text("gcm")])).get() }
        let injected = Values(table: [.builtin(.to): .text("x"), .builtin(.message): .text("m"), .stored(.user, slot: 0): .text("t\r\nX-Evil: 1")])
        #expect(throws: RenderError.self) { try send.render(injected).get() }
    }

    @Test("JSON Pointers read strings unescaped, other values as their JSON, arrays by index, ~1 and ~0 escapes")
    func pointers() throws {
        let body = Array(#"{"a":{"b/c":[10,{"x":"y\"z\u00e9"}],"m~n":true,"o":{"k":[1,2]}},"s":"plain"}"#.utf8)
        #expect(try JSONPointer("/a/b~1c/0").value(in: body) == .json("10"))
        #expect(try JSONPointer("/a/b~1c/1/x").value(in: body) == .text("y\"zé"))
        #expect(try JSONPointer("/a/m~0n").value(in: body) == .json("true"))
        #expect(try JSONPointer("/a/o").value(in: body) == .json(#"{"k":[1,2]}"#))
        #expect(try JSONPointer("/s").value(in: body) == .text("plain"))
        #expect(try JSONPointer("/a/b~1c/2").value(in: body) == nil)
        #expect(try JSONPointer("/missing").value(in: body) == nil)
        #expect(try JSONPointer("").value(in: Array(#""r-17""#.utf8)) == .text("r-17"))
        #expect(try JSONPointer("/x").value(in: Array("not json".utf8)) == nil)
        #expect(throws: TemplateError.self) { try JSONPointer("token") }
        // An array index is decimal digits without a leading zero, and `\u` takes four hex
        // digits exactly: `Int` and `UInt32(_:radix:)` alone would also take a sign.
        #expect(try JSONPointer("/a/b~1c/+1").value(in: body) == nil)
        #expect(try JSONPointer("/a/b~1c/01").value(in: body) == nil)
        #expect(try JSONPointer("/k").value(in: Array(#"{"k":"\u+041"}"#.utf8)) == nil)
        #expect(try JSONPointer("/k").value(in: Array(#"{"k":"\u0041"}"#.utf8)) == .text("A"))
    }

    @Test("session logins: a cookie's value is read from Set-Cookie, the last one for its name, quotes and attributes left out")
    func cookies() throws {
        let headers: [(name: String, value: String)] = [
            ("Set-Cookie", "csrftoken=c1; Path=/; SameSite=Lax"), ("Content-Type", "application/json"),
            ("set-cookie", "sessionid=\"s 1\" ; HttpOnly; Path=/"), ("Set-Cookie", "sessionidx=wrong"),
            ("Set-Cookie", "csrftoken=c2; Path=/"), ("Set-Cookie", "gone=; Max-Age=0"),
        ]
        let body: [UInt8] = []
        #expect(ValueReader.read(.cookie("sessionid"), headers: headers, body: body) == .text("s 1"))
        #expect(ValueReader.read(.cookie("csrftoken"), headers: headers, body: body) == .text("c2"))
        #expect(ValueReader.read(.cookie("gone"), headers: headers, body: body) == nil)
        #expect(ValueReader.read(.cookie("session"), headers: headers, body: body) == nil)

        let login = """
            login:
              method: POST
              path: /accounts/login/
              form: { username: "{{user}}", password: "{{password}}" }
              extract: { session: { cookie: sessionid }, csrf: [{ cookie: csrftoken }, { header: X-CSRFToken }] }
            headers: { Cookie: "sessionid={{session}}; csrftoken={{csrf}}", X-CSRFToken: "{{csrf}}" }
            register: { method: PUT, path: "/me/devices/{{device.push_token}}", json: { platform: "{{device.platform}}" } }
            send:
              plain: { method: POST, path: /messages, json: { to: "{{to}}", text: "{{message}}" } }
            """
        #expect(issues(Self.scenario(login)).isEmpty, "\(issues(Self.scenario(login)))")
        let api = try #require(try ScenarioLoader.parse(Self.scenario(login), file: "api.yaml").api)
        let extraction = try #require(api.login?.requests.first?.extract)
        #expect(extraction.map(\.sources) == [[.cookie("sessionid")], [.cookie("csrftoken"), .header("X-CSRFToken")]])
        let bad = issues(Self.scenario(login.replacingOccurrences(of: "{ cookie: sessionid }", with: "{ cookie: \"session id\" }")))
        #expect(bad.count == 1 && bad[0].contains("'session id' is not a cookie name"), "\(bad)")
    }

    @Test("a push is read by its platform's layout: rich id first, then secure id, then the nonce anywhere")
    func reading() throws {
        let api = try #require(ScenarioLoader.preset("appbackend"))
        let run = "00000000abcd"
        func read(_ body: String, _ platform: Scenario.PlatformName, _ type: String) -> PushContent {
            PushContent(body: Array(body.utf8), pushType: type, layout: api.receive.layout(platform), run: run)
        }
        #expect(read(#"{"aps":{"alert":"From u: pf:00000000abcd:7"}}"#, .apns, "alert") == .plain(nonce: .this(7)))
        #expect(read(#"{"aps":{"content-available":1},"secureId":"s1"}"#, .apns, "background") == .secure(id: "s1"))
        #expect(read(#"{"message":{"data":{"richId":"r1","richMessage":"pf:00000000abcd:9"}}}"#, .fcm, "data") == .rich(id: "r1", nonce: .this(9)))
        #expect(read("s2", .wns, "wns/raw") == .secure(id: "s2"))
        #expect(read("<toast><text>pf:00000000abcd:3</text></toast>", .wns, "wns/toast") == .plain(nonce: .this(3)))
        #expect(read("<toast><text>pf:ffffffffffff:3</text></toast>", .wns, "wns/toast") == .plain(nonce: .otherRun))
        #expect(read(#"{"aps":{"alert":"hello"}}"#, .apns, "alert").attribution == .unattributable)
    }

    func issues(_ yaml: String) -> [String] {
        do {
            _ = try ScenarioLoader.parse(yaml, file: "api.yaml")
            return []
        } catch {
            return error.issues.map(\.description)
        }
    }

    @Test("every problem of a description at once, each at its line and column")
    func problems() {
        let broken = """
            register:
              method: POST
              path: /devices/{{device.platfrom}}/
              extract: { pk: /id }
              on: { 410: { forget: [pk], then: relogin } }
            unregister: { method: DELETE, path: "/devices/{{pk}}/{{nothing}}" }
            send:
              plain: { method: POST, path: /notify, json: { to: "{{to}}", id: "{{device.push_token}}", t: "{{token}}" }, on: { 401: { then: login } } }
            """
        let found = issues(Self.scenario(broken))
        let expected = [
            "api.yaml:9:11: api.register.path: unknown variable 'device.platfrom': no step extracts it and pushfleet does not provide it (did you mean 'device.platform'?)",
            "api.yaml:11:38: api.register.on.410.then: 'relogin' is not one of retry, restart, login, fail (did you mean 'login'?)",
            "api.yaml:12:39: api.unregister.path: unknown variable 'nothing': no step extracts it and pushfleet does not provide it",
            "api.yaml:14:69: api.send.plain.json.id: {{device.push_token}} has no value in send.plain steps (a device's: register, unregister, probe, fetch)",
            "api.yaml:14:97: api.send.plain.json.t: unknown variable 'token': no step extracts it and pushfleet does not provide it",
            "api.yaml:14:131: api.send.plain.on.401.then: names the step 'login', which this api does not have",
        ]
        #expect(found == expected, "\(found.joined(separator: "\n"))")
    }

    @Test("what the scenario does needs its steps: a send per kind, a fetch for fetched kinds, unregister for departures; auth is the preset's")
    func crossChecks() {
        let found = issues(
            Self.scenario(
                "register: { method: POST, path: /d }", traffic: "[{ kind: secure, rate: 1/s, duration: 1s }]",
                extra: "auth: token\nfleet_extra: 1"
            ).replacingOccurrences(of: "fleet_extra: 1", with: "")
        )
        #expect(found.contains { $0.contains("auth: auth chooses how the appbackend preset logs in") }, "\(found)")
        #expect(found.contains { $0.contains("traffic[0].kind: the api has no send.secure step") }, "\(found)")
        let departure = issues(
            """
            name: d
            fleet: { users: 2, departure: { share: 50%, at: 1s } }
            api: { register: { method: POST, path: /d }, send: { plain: { method: POST, path: /s } } }
            traffic: [{ kind: plain, rate: 1/s, duration: 1s }]
            """
        )
        #expect(departure.contains { $0.contains("fleet.departure: departing devices unregister: the api needs an unregister step") }, "\(departure)")
        #expect(issues("name: p\nfleet: { users: 1 }\napi: appbackends").first?.contains("(did you mean 'appbackend'?)") == true)
    }
}
