import Foundation
import PushFleetCore
import PushFleetScenario
import Testing

/// `receive.webpush`: where browsers get the applicationServerKey, which endpoint forms they
/// get, and the subscription's fields as template variables.
@Suite("api: Web Push")
struct APIWebPushTests {
    static let key = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"

    static func scenario(_ webpush: String, register: String = #"json: { handle: "{{device.push_token}}" }"#) -> String {
        APIDescriptionTests.scenario(
            """
            register: { method: POST, path: /devices, \(register) }
            send: { plain: { method: POST, path: /notify, json: { to: "{{to}}", text: "{{message}}" } } }
            receive:
              webpush: \(webpush)
            """
        ).replacingOccurrences(of: "fleet: { users: 3 }", with: "fleet: { users: 3, platforms: { webpush: 1 } }")
    }

    func issues(_ yaml: String) -> [String] {
        APIDescriptionTests().issues(yaml)
    }

    @Test("a literal key, a key read from the backend, and the services in turn")
    func reads() throws {
        let literal = try ScenarioLoader.parse(Self.scenario("{ application_server_key: \(Self.key), services: [mozilla, apple] }"), file: "a.yaml")
        let receive = try #require(literal.api?.receive)
        #expect(receive.webPush.applicationServerKey == .literal(Self.key))
        #expect(receive.webPush.services == [.mozilla, .apple] && receive.webPush.endpoints == .local)
        #expect((0..<4).map { receive.webPush.service(device: $0) } == [.mozilla, .apple, .mozilla, .apple])
        #expect(receive.token(.webpush) == .subscription)

        let fetched = try ScenarioLoader.parse(Self.scenario("{ application_server_key: { path: /vapid, json: /key }, endpoints: public }"), file: "a.yaml")
        #expect(fetched.api?.receive.webPush.endpoints == .public)
        #expect(fetched.api?.receive.webPush.applicationServerKey == .fetch(path: "/vapid", location: .json(try JSONPointer("/key"))))
        #expect(fetched.api?.receive.webPush.services == WebPushReceive.Service.allCases)

        let preset = try ScenarioLoader.parse("name: p\ntarget: embedded\nfleet: { users: 2, platforms: { webpush: 1 } }\ntraffic: [{ kind: plain, rate: 1/s, duration: 1s }]\n", file: "p.yaml")
        #expect(preset.api?.receive.webPush.applicationServerKey == .fetch(path: "/api/webpush/vapid", location: .json(try JSONPointer("/publicKey"))))
    }

    @Test("the subscription's fields are device variables")
    func variables() throws {
        let yaml = Self.scenario(
            "{ token: subscription }", register: #"json: { registration_id: "{{device.endpoint}}", p256dh: "{{device.p256dh}}", auth: "{{device.auth}}" }"#
        )
        let scenario = try ScenarioLoader.parse(yaml, file: "a.yaml")
        let request = try #require(scenario.api?.register.requests.first)
        #expect(request.variables.contains(.builtin(.deviceEndpoint)) && request.variables.contains(.builtin(.deviceP256dh)))
        #expect(request.variables.contains(.builtin(.deviceAuth)))
    }

    @Test("a key that is no P-256 point, a path that is none, an unknown service: each named at its place")
    func refusals() {
        #expect(issues(Self.scenario("{ application_server_key: not-a-key }")).contains { $0.contains("receive.webpush.application_server_key") && $0.contains("65-byte") })
        #expect(issues(Self.scenario("{ application_server_key: { path: vapid, json: /k } }")).contains { $0.contains("is not a path on the backend") })
        #expect(issues(Self.scenario("{ application_server_key: { json: /k } }")).contains { $0.contains("give the path") })
        #expect(issues(Self.scenario("{ services: [fcm, aol] }")).contains { $0.contains("receive.webpush.services[1]") })
        #expect(issues(Self.scenario("{ services: [] }")).contains { $0.contains("name at least one") })
        #expect(issues(Self.scenario("{ endpoints: remote }")).contains { $0.contains("receive.webpush.endpoints") })
        // Only browsers have these.
        let onFCM = APIDescriptionTests.scenario("register: { method: POST, path: /d }\nreceive:\n  fcm: { services: [fcm] }")
        #expect(issues(onFCM).contains { $0.contains("receive.fcm") })
    }
}
