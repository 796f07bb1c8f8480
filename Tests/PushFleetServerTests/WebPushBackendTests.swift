import Crypto
import Foundation
import NIOHTTP1
import PushFleetCore
import PushFleetTestSupport
import PushFleetWebPush
import PushFleetWire
import Testing

/// The reference backend sends Web Push: a browser subscribes at the push service with the
/// backend's VAPID key, registers its subscription as its handle, and decrypts the plain, secure
/// and rich pushes the backend encrypts for it.
@Suite("Web Push from the reference backend")
struct WebPushBackendTests {
    struct Browser {
        var keys: WebPushKeys
        var subscription: WebPushSubscription
        var device: TestDevice
    }

    static func browser(_ system: TestSystem, user: String, service: String = "fcm") async throws -> Browser {
        struct Key: Decodable {
            var publicKey: String
        }
        let vapid = try await TestHTTP.request(.GET, "\(system.backend)/api/webpush/vapid").json(Key.self)
        let minted = try await TestHTTP.request(
            .POST, "\(system.pushService)/webpush/subscriptions", json: ["service": service, "applicationServerKey": vapid.publicKey]
        ).json(WebPushServiceTests.Minted.self)
        let keys = WebPushKeys.generate()
        let subscription = WebPushSubscription(endpoint: minted.endpoint, keys: .init(p256dh: keys.p256dh, auth: keys.auth))
        let device = try await TestDevice.connect(pushService: system.pushService, platform: .webpush, token: minted.token)
        _ = try await system.register(user, platform: .webpush, handle: subscription.json)
        return Browser(keys: keys, subscription: subscription, device: device)
    }

    static func payload(_ frame: PushFrame, _ browser: Browser) throws -> [String: String] {
        let text = try WebPushServiceTests.decrypt(frame, with: browser.keys)
        return try JSONDecoder().decode([String: String].self, from: Data(text.utf8))
    }

    @Test("plain, secure and rich pushes reach a browser in each endpoint form, encrypted for it and signed with the backend's key")
    func sends() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            for service in ["fcm", "mozilla", "windows", "apple"] {
                let user = "bob-\(service)"
                let browser = try await Self.browser(system, user: user, service: service)
                defer { browser.device.close() }
                let plain = try await system.sendPlain(from: "alice", to: user, pns: "webpush", message: "hi \"\(service)\"")
                #expect(plain.status == 200, "\(plain.text)")
                let secure = try await system.sendSecure(from: "alice", to: user, payload: "the vault code is 1234")
                #expect(secure.status == 200)
                let rich = try await TestHTTP.request(
                    .POST, "\(system.backend)/api/notifications/rich?to_tag=\(user)", auth: .user("alice"),
                    json: "look"
                )
                #expect(rich.status == 200, "\(rich.text)")
                let frames = try await browser.device.waitForPushes(3)
                let payloads = try frames.map { try Self.payload($0, browser) }
                #expect(payloads[0] == ["message": "From alice: hi \"\(service)\""], "\(service)")
                let secureID = try #require(payloads[1]["secureId"])
                let fetched = try await system.fetch(secureID, as: user)
                #expect(fetched.status == 200 && fetched.text.contains("1234"))
                #expect(payloads[2]["richMessage"] == "look" && payloads[2]["richType"] == "img" && payloads[2]["richId"] != nil)
            }
            let stats = try await system.pushStats()
            #expect(stats.accepted == 12 && (stats.rejected.filter { $0.key.hasPrefix("webpush") }.isEmpty))
        }
    }

    @Test("a subscription that is not one, or on another host, is refused or removed; an unsubscribed browser's registration goes")
    func handles() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let keys = WebPushKeys.generate()
            for bad in ["not json", #"{"endpoint":"ftp://x/y","keys":{"p256dh":"\#(keys.p256dh)","auth":"\#(keys.auth)"}}"#,
                #"{"endpoint":"https://fcm.googleapis.com/fcm/send/abc","keys":{"p256dh":"AAAA","auth":"\#(keys.auth)"}}"#]
            {
                let id = try await system.createRegistrationID("carol", handle: nil)
                #expect(try await system.updateRegistration(id, "carol", platform: "webpush", handle: bad).status == 400, "\(bad)")
            }
            // Another host's endpoint: the backend never posts there; the registration is dropped as dead.
            let elsewhere = WebPushSubscription(endpoint: "https://attacker.example/steal", keys: .init(p256dh: keys.p256dh, auth: keys.auth))
            _ = try await system.register("carol", platform: .webpush, handle: elsewhere.json)
            let sent = try await system.sendPlain(from: "alice", to: "carol", pns: "webpush", message: "x")
            #expect(sent.status == 200 && sent.text.contains("\"removed\":1"), "\(sent.text)")

            let browser = try await Self.browser(system, user: "dave")
            defer { browser.device.close() }
            let token = try #require(browser.subscription.endpoint.split(separator: "/").last)
            #expect(try await TestHTTP.request(.DELETE, "\(system.pushService)/webpush/subscriptions/\(token)").status == 204)
            let gone = try await system.sendPlain(from: "alice", to: "dave", pns: "webpush", message: "x")
            #expect(gone.status == 200 && gone.text.contains("\"removed\":1"), "410 removes the registration: \(gone.text)")
            let after = try await system.sendPlain(from: "alice", to: "dave", pns: "webpush", message: "x")
            #expect(after.text.contains("NoTargetFound"), "\(after.text)")
        }
    }
}
