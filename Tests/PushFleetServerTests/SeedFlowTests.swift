import Foundation
import NIOHTTP1
import PushFleetTestSupport
import PushFleetWire
import Testing

/// The seeds' whole flow over real sockets: alice and bob with two devices each on different
/// platforms; only bob's devices get what alice sends him.
@Suite("Seed flow")
struct SeedFlowTests {
    @Test("plain, secure and rich pushes reach only the recipient's devices")
    func seedFlow() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let alicePhone = try await system.device("alice", .apns)
            let aliceTablet = try await system.device("alice", .wns)
            let bobPhone = try await system.device("bob", .apns)
            let bobAndroid = try await system.device("bob", .fcm)

            // Plain: one call per platform, as the seed's app does with its switches.
            for pns in ["apns", "fcm"] {
                let response = try await system.sendPlain(from: "alice", to: "bob", pns: pns, message: "hi \"bob\" <3")
                #expect(response.status == 200, "\(response.text)")
                #expect(try response.json(SendOutcome.self).accepted == 1)
            }
            let apnsAlert = try await bobPhone.waitForPushes(1)[0]
            #expect((apnsAlert.json["aps"] as? [String: Any])?["alert"] as? String == "From alice: hi \"bob\" <3")
            #expect(apnsAlert.pushType == "alert")
            let fcmAlert = try await bobAndroid.waitForPushes(1)[0]
            #expect((fcmAlert.json["message"] as? [String: Any])?["data"] as? [String: String] == ["message": "From alice: hi \"bob\" <3"])
            #expect((fcmAlert.json["message"] as? [String: Any])?["token"] as? String == bobAndroid.address?.token)

            // Secure: only the id travels, to every platform of bob's.
            let secure = try await system.sendSecure(from: "alice", to: "bob", payload: "the vault code is 1234")
            #expect(secure.status == 200)
            let secureOutcome = try secure.json(SendOutcome.self)
            #expect(secureOutcome.targets == 2 && secureOutcome.accepted == 2)
            let phoneSecure = try await bobPhone.waitForPushes(2)[1]
            let androidSecure = try await bobAndroid.waitForPushes(2)[1]
            let secureID = try #require(phoneSecure.json["secureId"] as? String)
            #expect(secureID == secureOutcome.id)
            #expect((phoneSecure.json["aps"] as? [String: Any])?["content-available"] as? Int == 1)
            #expect(((androidSecure.json["message"] as? [String: Any])?["data"] as? [String: String])?["secureId"] == secureID)
            #expect(!phoneSecure.body.contains("vault"))

            let fetched = try await system.fetch(secureID, as: "bob")
            #expect(fetched.status == 200)
            #expect(try fetched.json(SecureNotification.self) == SecureNotification(id: secureID, payload: "the vault code is 1234", read: false))
            #expect(try await system.fetch(secureID, as: "bob").json(SecureNotification.self).read)
            // Anyone else, the sender included, is told the id does not exist.
            #expect(try await system.fetch(secureID, as: "alice").status == 404)
            #expect(try await system.fetch("no-such-id", as: "alice").status == 404)

            // Rich: a silent push naming the content, then the image fetched by the recipient.
            let rich = try await TestHTTP.request(
                .POST, "\(system.backend)/api/notifications/rich?to_tag=bob", auth: .user("alice"), json: "Check this image out!"
            )
            #expect(rich.status == 200)
            let richPush = try await bobPhone.waitForPushes(3)[2]
            #expect(richPush.json["richMessage"] as? String == "Check this image out!")
            #expect(richPush.json["richType"] as? String == "img")
            let richID = try #require(richPush.json["richId"] as? String)
            let image = try await system.fetch(richID, as: "bob")
            #expect(image.status == 200)
            #expect(image.headers.first(name: "content-type") == "image/png")
            #expect(image.body.starts(with: [0x89, 0x50, 0x4E, 0x47]))
            #expect(try await system.fetch(richID, as: "alice").status == 404)
            _ = try await bobAndroid.waitForPushes(3)

            // Nothing reached alice's devices, and nothing more reached bob's.
            try await Task.sleep(for: .milliseconds(200))
            #expect(alicePhone.pushes.isEmpty)
            #expect(aliceTablet.pushes.isEmpty)
            #expect(bobPhone.pushes.count == 3)
            #expect(bobAndroid.pushes.count == 3)
        }
    }

    @Test("secure and rich sends to a user with no device store nothing")
    func nothingStoredForNobody() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let secure = try await system.sendSecure(from: "alice", to: "nobody", payload: "p")
            #expect(secure.status == 200)
            #expect(try secure.json(SendOutcome.self) == SendOutcome(outcome: .noTargetFound, targets: 0, accepted: 0, failed: 0, removed: 0))
            for _ in 0..<3 {
                let rich = try await TestHTTP.request(
                    .POST, "\(system.backend)/api/notifications/rich?to_tag=nobody", auth: .user("alice"), json: "look"
                )
                #expect(rich.status == 200)
                #expect(try rich.json(SendOutcome.self).outcome == .noTargetFound)
            }
            #expect(try await system.backendStats().storedNotifications == 0)
            // A user with a device still gets the content stored.
            _ = try await system.device("bob", .fcm)
            #expect(try await system.sendSecure(from: "alice", to: "bob", payload: "p").status == 200)
            #expect(try await system.backendStats().storedNotifications == 1)
        }
    }

    @Test("a WNS device gets a toast, a raw secure id and the rich fields")
    func wnsFormats() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let tablet = try await system.device("carol", .wns)
            #expect(try await system.sendPlain(from: "dave", to: "carol", pns: "wns", message: "a < b & c").status == 200)
            let toast = try await tablet.waitForPushes(1)[0]
            #expect(toast.pushType == "wns/toast")
            #expect(toast.body.contains("From dave: a &lt; b &amp; c"))
            let secure = try await system.sendSecure(from: "dave", to: "carol", payload: "p")
            let id = try #require(try secure.json(SendOutcome.self).id)
            let raw = try await tablet.waitForPushes(2)[1]
            #expect(raw.pushType == "wns/raw")
            #expect(raw.body == id)
        }
    }

    @Test("token login: Bearer works on every call; secure sends default to the caller")
    func tokenLogin() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let login = try await TestHTTP.request(.POST, "\(system.backend)/api/login", auth: .user("erin"))
            #expect(login.status == 200)
            let token = try login.json(LoginResponse.self)
            #expect(token.tokenType == "Bearer" && token.expiresIn == 3600)
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .fcm)
            _ = try await system.register("erin", platform: .fcm, handle: device.address!.token, auth: .bearer(token.token))
            let secure = try await TestHTTP.request(
                .POST, "\(system.backend)/api/notifications/secure", auth: .bearer(token.token), json: "note to self"
            )
            let id = try #require(try secure.json(SendOutcome.self).id)
            _ = try await device.waitForPushes(1)
            let fetched = try await TestHTTP.request(.GET, "\(system.backend)/api/notifications/\(id)", auth: .bearer(token.token))
            #expect(try fetched.json(SecureNotification.self).payload == "note to self")
        }
    }
}
