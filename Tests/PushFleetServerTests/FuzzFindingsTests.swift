import Foundation
import NIOHTTP1
import PushFleetBackend
import PushFleetCore
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetScenario
import PushFleetTestSupport
import PushFleetWire
import Testing

/// What the fuzzers (Fuzz/, docs/testing.md), schemathesis and the review that went with them
/// found in the servers, one test each (the scenario findings are with the core tests, the corpus
/// replay with the CLI tests).
@Suite("Fuzz findings")
struct FuzzFindingsTests {
    static func scenario(_ yaml: String) throws(ScenarioIssues) -> Scenario {
        try ScenarioLoader.parse(yaml, file: "finding.yaml")
    }

    @Test("pushes held for offline devices are bounded in number, and expired ones make room")
    func heldPushesBounded() async throws {
        // The push service's clock is the test's: expiry happens when the test moves it, never
        // while the hold is being filled, however loaded the machine.
        let clock = ManualWallClock()
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushService.maxHeldPushes = 3
        configuration.pushServiceClock = { clock.now }
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            // Every new token a provider names would otherwise keep its push for good.
            let soon = String(clock.seconds + 3)
            for _ in 0..<5 {
                let response = try await system.apnsPush(token: TestDevice.randomToken(for: .apns), headers: [("apns-expiration", soon)])
                #expect(response.status == 200)
            }
            var stats = try await system.pushStats()
            #expect(stats.held == 3 && stats.heldFull == 2 && stats.stored == 3, "\(stats)")
            clock.advance(by: .seconds(4))
            #expect(try await system.apnsPush(token: TestDevice.randomToken(for: .apns)).status == 200)
            stats = try await system.pushStats()
            #expect(stats.held == 1 && stats.expired == 3 && stats.heldFull == 2 && stats.stored == 4, "\(stats)")
        }
    }

    @Test("a handle the push service refuses as no token of its platform is removed like a dead one: 200 NoTargetFound, not 500 (schemathesis)")
    func invalidHandles() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let handles: [(Platform, String)] = [(.apns, "zz"), (.fcm, "not!a-token"), (.wns, "http://elsewhere.invalid/wns/x")]
            var ids: [String] = []
            for (platform, handle) in handles { ids.append(try await system.register("bob", platform: platform, handle: handle)) }
            for (platform, _) in handles {
                let sent = try await system.sendPlain(from: "alice", to: "bob", pns: platform.rawValue, message: "hi")
                #expect(sent.status == 200, "\(platform): \(sent.text)")
                #expect(try sent.json(SendOutcome.self) == SendOutcome(outcome: .noTargetFound, targets: 1, accepted: 0, failed: 0, removed: 1))
            }
            // Gone, as after Unregistered: the device's next PUT of its id tells it to register again.
            for (id, (platform, handle)) in zip(ids, handles) {
                #expect(try await system.updateRegistration(id, "bob", platform: platform.rawValue, handle: handle).status == 410)
            }
            #expect(try await system.backendStats().feedbackRemoved == 3)
        }
    }

    @Test("a plain send when the store cannot be read is 503, as docs/openapi.yaml says, not the hub's 500 Abandoned")
    func plainSendStoreUnavailable() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.store = .sqlite(path: "/proc/no-such-folder/pushfleet.db")
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let sent = try await system.sendPlain(from: "alice", to: "bob", pns: "apns", message: "hi")
            #expect(sent.status == 503 && sent.text.contains("the store is unavailable"), "\(sent.status) \(sent.text)")
        }
    }

    @Test("a rich image's content type must be a well-formed image media type: the recipient's fetch answers with it")
    func richContentType() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            _ = try await system.device("bob", .apns)
            func send(_ contentType: String) async throws -> TestResponse {
                try await TestHTTP.request(
                    .POST, "\(system.backend)/api/notifications/rich?to_tag=bob", auth: .user("alice"),
                    json: RichNotificationRequest(message: "m", image: "aGVsbG8=", contentType: contentType)
                )
            }
            for refused in ["image/png\r\nX-Evil: 1", "image/", "image/png; q=1", "image/ png", "text/html", "image/-x"] {
                #expect(try await send(refused).status == 400, "\(refused)")
            }
            let sent = try await send("image/svg+xml")
            #expect(sent.status == 200)
            let id = try #require(try sent.json(SendOutcome.self).id)
            let fetched = try await system.fetch(id, as: "bob")
            #expect(fetched.status == 200 && fetched.headers.first(name: "content-type") == "image/svg+xml")
        }
    }
}
