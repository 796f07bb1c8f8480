import Crypto
import Foundation
import NIOHTTP1
import PushFleetCore
import PushFleetHub
import PushFleetTestSupport
import PushFleetWebPush
import PushFleetWire
import Testing

/// Browsers in the notification hub: registrations, templates and installations that carry a
/// subscription (`Endpoint`, `P256DH`, `Auth`), sends in the `browser` format, and the hub's
/// browser credential. Each push is checked as the browser reads it: decrypted with its keys.
@Suite("Notification hub: browsers")
struct HubBrowserTests {
    struct Minted: Decodable {
        var endpoint: String
        var token: String
    }

    /// A browser subscribed with the hub's VAPID key, online on the gateway.
    struct Browser {
        var keys = WebPushKeys.generate()
        var endpoint: String
        var device: TestDevice
    }

    static func browser(_ system: TestSystem, hub: NotificationHub.Settings, service: String = "fcm") async throws -> Browser {
        let asked = ["service": service, "applicationServerKey": hub.browserCredential.applicationServerKey]
        let minted = try await TestHTTP.request(.POST, "\(system.pushService)/webpush/subscriptions", json: asked).json(Minted.self)
        let device = try await TestDevice.connect(pushService: system.pushService, platform: .webpush, token: minted.token)
        return Browser(endpoint: minted.endpoint, device: device)
    }

    static func read(_ frame: PushFrame, _ browser: Browser) throws -> String {
        let encoding = try #require(frame.webPush?.contentEncoding.flatMap(WebPushContentEncoding.init(rawValue:)))
        let plaintext = try WebPushEncryption.decrypt(try #require(Data(base64Encoded: frame.body)), encoding: encoding, keys: browser.keys)
        return String(decoding: plaintext, as: UTF8.self)
    }

    static func entry(_ element: String, endpoint: String, p256dh: String, auth: String, tags: String, template: String? = nil) -> Data {
        var xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?><entry xmlns=\"http://www.w3.org/2005/Atom\"><content type=\"application/xml\">"
        xml += "<\(element) xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\" xmlns=\"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect\">"
        xml += "<Tags>\(tags)</Tags><Endpoint>\(XMLText.escape(endpoint))</Endpoint><P256DH>\(p256dh)</P256DH><Auth>\(auth)</Auth>"
        if let template { xml += "<BodyTemplate><![CDATA[\(template)]]></BodyTemplate>" }
        return Data((xml + "</\(element)></content></entry>").utf8)
    }

    @Test("native and template registrations: a browser send and a template send reach the browser, encrypted for it and signed with the hub's key")
    func registrations() async throws {
        let settings = NotificationHub.Settings(namespace: "browserns", hubName: "browserhub")
        try await TestSystem.withHub(settings, devices: []) { system, sdk, _ in
            let native = try await Self.browser(system, hub: settings)
            let templated = try await Self.browser(system, hub: settings, service: "mozilla")
            defer { [native, templated].forEach { $0.device.close() } }
            let put = try await sdk.request(
                .PUT, "registrations/b1",
                body: Self.entry("BrowserRegistrationDescription", endpoint: native.endpoint, p256dh: native.keys.p256dh, auth: native.keys.auth, tags: "username:ann"),
                headers: [("Content-Type", "application/atom+xml; type=entry; charset=utf-8")]
            )
            #expect(put.status == 200, "\(put.text)")
            #expect(put.text.contains("<Tags>username:ann</Tags><Endpoint>\(XMLText.escape(native.endpoint))</Endpoint><P256DH>\(native.keys.p256dh)</P256DH><Auth>\(native.keys.auth)</Auth></BrowserRegistrationDescription>"))
            let template = try await sdk.request(
                .PUT, "registrations/b2",
                body: Self.entry(
                    "BrowserTemplateRegistrationDescription", endpoint: templated.endpoint, p256dh: templated.keys.p256dh, auth: templated.keys.auth,
                    tags: "username:ann", template: #"{"title":"$(title)"}"#
                ),
                headers: [("Content-Type", "application/atom+xml; type=entry; charset=utf-8")]
            )
            #expect(template.status == 200, "\(template.text)")
            #expect(template.text.contains("<BrowserTemplateRegistrationDescription") && template.text.contains("<BodyTemplate><![CDATA[{\"title\":\"$(title)\"}]]></BodyTemplate>"))

            #expect(try await sdk.send(format: "browser", body: #"{"title":"hello ann"}"#, tags: ["username:ann"]).status == 201)
            #expect(try Self.read(try await native.device.waitForPushes(1)[0], native) == #"{"title":"hello ann"}"#)
            #expect(try await sdk.send(format: "template", body: #"{"title":"templated"}"#, tags: ["username:ann"]).status == 201)
            #expect(try Self.read(try await templated.device.waitForPushes(1)[0], templated) == #"{"title":"templated"}"#)
            // A browser send selects browser registrations only: the template one got nothing more.
            try await Task.sleep(for: .milliseconds(200))
            #expect(templated.device.pushes.count == 1 && native.device.pushes.count == 1)
        }
    }

    @Test("an installation's pushChannel is the subscription object; GET gives it back; sends to its tag arrive decrypted")
    func installation() async throws {
        let settings = NotificationHub.Settings(namespace: "browserns", hubName: "browserhub")
        try await TestSystem.withHub(settings, devices: []) { system, sdk, _ in
            let browser = try await Self.browser(system, hub: settings, service: "windows")
            defer { browser.device.close() }
            let body = #"{"installationId":"web-1","platform":"browser","pushChannel":{"endpoint":"\#(browser.endpoint)","p256dh":"\#(browser.keys.p256dh)","auth":"\#(browser.keys.auth)"},"tags":["username:bo"]}"#
            #expect(try await sdk.request(.PUT, "installations/web-1", body: Data(body.utf8), headers: [("Content-Type", "application/json")]).status == 200)
            let got = try await sdk.request(.GET, "installations/web-1")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(got.text.utf8)) as? [String: Any])
            #expect(object["platform"] as? String == "browser")
            #expect(object["pushChannel"] as? [String: String] == ["endpoint": browser.endpoint, "p256dh": browser.keys.p256dh, "auth": browser.keys.auth])
            #expect(try await sdk.send(format: "browser", body: "plain text", tags: ["$InstallationId:{web-1}"]).status == 201)
            #expect(try Self.read(try await browser.device.waitForPushes(1)[0], browser) == "plain text")
            // A browser's pushChannel is the subscription, keys and all.
            let bare = #"{"installationId":"web-2","platform":"browser","pushChannel":"\#(browser.endpoint)"}"#
            let refused = try await sdk.request(.PUT, "installations/web-2", body: Data(bare.utf8), headers: [("Content-Type", "application/json")])
            #expect(refused.status == 400 && refused.text.contains("{endpoint, p256dh, auth}"))
        }
    }

    @Test("a direct send takes the endpoint and the P256DH and Auth headers; without them it is refused")
    func directSend() async throws {
        let settings = NotificationHub.Settings(namespace: "browserns", hubName: "browserhub")
        try await TestSystem.withHub(settings, devices: []) { system, sdk, _ in
            let browser = try await Self.browser(system, hub: settings, service: "apple")
            defer { browser.device.close() }
            let headers = [
                ("ServiceBusNotification-Format", "browser"), ("ServiceBusNotification-DeviceHandle", browser.endpoint), ("P256DH", browser.keys.p256dh),
                ("Auth", browser.keys.auth), ("Content-Type", "application/json"),
            ]
            let sent = try await sdk.request(.POST, "messages", query: "&direct", body: Data(#"{"body":"direct"}"#.utf8), headers: headers)
            #expect(sent.status == 201, "\(sent.text)")
            #expect(try Self.read(try await browser.device.waitForPushes(1)[0], browser) == #"{"body":"direct"}"#)
            let keyless = try await sdk.request(.POST, "messages", query: "&direct", body: Data("x".utf8), headers: Array(headers.prefix(2)))
            #expect(keyless.status == 400 && keyless.text.contains("P256DH and Auth"))
        }
    }

    @Test("keys that are no P-256 point or 16-byte secret are refused at registration; an unsubscribed browser's registration goes")
    func refusalsAndExpiry() async throws {
        let settings = NotificationHub.Settings(namespace: "browserns", hubName: "browserhub")
        try await TestSystem.withHub(settings, devices: []) { system, sdk, _ in
            let browser = try await Self.browser(system, hub: settings)
            defer { browser.device.close() }
            let type = [("Content-Type", "application/atom+xml; type=entry; charset=utf-8")]
            for (p256dh, auth) in [("AAAA", browser.keys.auth), (browser.keys.p256dh, "short"), ("", "")] {
                let bad = try await sdk.request(
                    .PUT, "registrations/bad", body: Self.entry("BrowserRegistrationDescription", endpoint: browser.endpoint, p256dh: p256dh, auth: auth, tags: "t"), headers: type
                )
                #expect(bad.status == 400 && bad.text.contains("P256DH"), "\(bad.text)")
            }
            // An endpoint that is no http(s) URL, in a registration, an installation and a direct send.
            for endpoint in ["not a url", "ftp://fcm.googleapis.com/fcm/send/x", "https://", "/fcm/send/relative"] {
                let bad = try await sdk.request(
                    .PUT, "registrations/bad",
                    body: Self.entry("BrowserRegistrationDescription", endpoint: endpoint, p256dh: browser.keys.p256dh, auth: browser.keys.auth, tags: "t"),
                    headers: type
                )
                #expect(bad.status == 400 && bad.text.contains("http(s) URL"), "\(endpoint): \(bad.text)")
                let installation = #"{"platform":"browser","pushChannel":{"endpoint":"\#(endpoint)","p256dh":"\#(browser.keys.p256dh)","auth":"\#(browser.keys.auth)"}}"#
                let refused = try await sdk.request(.PUT, "installations/bad", body: Data(installation.utf8), headers: [("Content-Type", "application/json")])
                #expect(refused.status == 400 && refused.text.contains("http(s) URL"), "\(endpoint): \(refused.text)")
                let direct = try await sdk.request(
                    .POST, "messages", query: "&direct", body: Data("x".utf8),
                    headers: [
                        ("ServiceBusNotification-Format", "browser"), ("ServiceBusNotification-DeviceHandle", endpoint), ("P256DH", browser.keys.p256dh),
                        ("Auth", browser.keys.auth),
                    ]
                )
                #expect(direct.status == 400 && direct.text.contains("http(s) URL"), "\(endpoint): \(direct.text)")
            }
            let good = Self.entry("BrowserRegistrationDescription", endpoint: browser.endpoint, p256dh: browser.keys.p256dh, auth: browser.keys.auth, tags: "username:cy")
            #expect(try await sdk.request(.PUT, "registrations/gone", body: good, headers: type).status == 200)
            let token = String(browser.endpoint.split(separator: "/").last!)
            #expect(try await TestHTTP.request(.DELETE, "\(system.pushService)/webpush/subscriptions/\(token)").status == 204)
            #expect(try await sdk.send(format: "browser", body: "after", tags: ["username:cy"]).status == 201)
            // The push service answered 410: the hub drops the registration.
            var status = 200
            for _ in 0..<50 where status == 200 {
                status = try await sdk.request(.GET, "registrations/gone").status
                if status == 200 { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(status == 404)
        }
    }
}
