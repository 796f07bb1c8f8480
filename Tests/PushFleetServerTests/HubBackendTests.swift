import Foundation
import NIOHTTP1
import PushFleetCore
import PushFleetEmbedded
import PushFleetHub
import PushFleetMockPush
import PushFleetScenario
import PushFleetTestSupport
import PushFleetWire
import Testing

/// The reference backend sending through the embedded hub: backend → hub → push service → device.
@Suite("Reference backend through the hub")
struct HubBackendTests {
    static var configuration: EmbeddedSystem.Configuration {
        var configuration = EmbeddedSystem.Configuration()
        configuration.throughHub = true
        return configuration
    }

    @Test func theSeedFlowGoesThroughTheHub() async throws {
        try await TestSystem.runEmbedded(Self.configuration) { embedded, system in
            let hub = try #require(embedded.pushServer?.hub)
            let bobPhone = try await system.device("bob", .apns)
            let bobTablet = try await system.device("bob", .wns)
            let bobAndroid = try await system.device("bob", .fcm)
            let carol = try await system.device("carol", .apns)
            defer { [bobPhone, bobTablet, bobAndroid, carol].forEach { $0.close() } }
            // The registrations live in the hub, tagged with the user.
            let now = Int64(Date().timeIntervalSince1970 * 1e9)
            #expect(hub.store.targets(platform: .apple, expression: try TagExpression.parse("username:bob"), now: now).count == 1)
            #expect(hub.store.targets(platform: .windows, expression: nil, now: now).first?.handle.hasSuffix("/wns/\(bobTablet.address!.token)") == true)

            let plain = try await system.sendPlain(from: "alice", to: "bob", pns: "apns", message: "hi")
            #expect(plain.status == 200)
            #expect(try plain.json(SendOutcome.self).outcome == .enqueued)
            #expect(try await bobPhone.waitForPushes(1)[0].body == #"{"aps":{"alert":"From alice: hi"}}"#)
            let secure = try await system.sendSecure(from: "alice", to: "bob", payload: "secret")
            #expect(secure.status == 200)
            let id = try #require(try secure.json(SendOutcome.self).id)
            #expect(try await bobTablet.waitForPushes(1)[0].body == id)
            #expect(try await bobAndroid.waitForPushes(1)[0].body.contains(id))
            #expect(try await system.fetch(id, as: "bob").status == 200)
            #expect(try await system.fetch(id, as: "carol").status == 404)
            try await Task.sleep(for: .milliseconds(100))
            #expect(carol.pushes.isEmpty)
            #expect(bobPhone.pushes.count == 2)
        }
    }

    @Test func aHandleThatChangesHandsKeepsOneHubRegistration() async throws {
        try await TestSystem.runEmbedded(Self.configuration) { embedded, system in
            let hub = try #require(embedded.pushServer?.hub)
            let phone = try await TestDevice.connect(pushService: system.pushService, platform: .apns)
            defer { phone.close() }
            let token = phone.address!.token
            let first = try await system.register("dave", platform: .apns, handle: token)
            // The phone now belongs to erin: a new id for the same handle. As the seed does, the
            // hub's other registrations of that handle go — else dave's pushes would reach erin.
            let second = try await system.register("erin", platform: .apns, handle: token)
            #expect(second != first)
            let now = Int64(Date().timeIntervalSince1970 * 1e9)
            #expect(hub.store.query(.handle(token), top: 100, continuation: nil, now: now).page.map(\.id) == [second])
            #expect(try await system.sendPlain(from: "frank", to: "dave", pns: "apns", message: "not for erin").status == 200)
            #expect(try await system.sendPlain(from: "frank", to: "erin", pns: "apns", message: "once").status == 200)
            let pushes = try await phone.waitForPushes(1)
            try await Task.sleep(for: .milliseconds(150))
            #expect(phone.pushes.count == 1 && pushes[0].body.contains("once"), "one registration, the new owner's, one push")
            // Deleting through the backend deletes in the hub.
            #expect(try await TestHTTP.request(.DELETE, "\(system.backend)/api/register/\(second)", auth: .user("erin")).status == 200)
            #expect(hub.store.count == 0)
        }
    }

    @Test func theScenarioKeyIsForTheEmbeddedTarget() throws {
        let embedded = try ScenarioLoader.parse("name: h\nembedded: { hub: true }\nfleet: { users: 1 }\ntraffic: []\n", file: "h.yaml")
        #expect(embedded.embedded.hub)
        let external = "name: h\ntarget: { backend: http://127.0.0.1:9, pns: http://127.0.0.1:9 }\nembedded: { hub: true }\nfleet: { users: 1 }\ntraffic: []\n"
        #expect(throws: (any Error).self) { try ScenarioLoader.parse(external, file: "h.yaml") }
        do {
            _ = try ScenarioLoader.parse(external, file: "h.yaml")
        } catch {
            #expect("\(error)".contains("embedded.hub"))
        }
        #expect(throws: (any Error).self) { try ScenarioLoader.parse("name: h\nembedded: { hub: maybe }\nfleet: { users: 1 }\ntraffic: []\n", file: "h.yaml") }
    }
}
