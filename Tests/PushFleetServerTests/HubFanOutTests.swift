import Foundation
import NIOHTTP1
import PushFleetCore
import PushFleetEmbedded
import PushFleetHub
import PushFleetMockPush
import PushFleetTestSupport
import PushFleetWire
import Testing

/// Sends through the hub reach exactly the devices they select, in each platform's format.
@Suite("Notification hub fan-out")
struct HubFanOutTests {
    static func register(_ sdk: DotNetHubWire, _ device: TestDevice, tags: [String]) async throws -> String {
        let (_, id) = try await sdk.createRegistrationID()
        let (element, handleElement): (String, String) =
            switch device.address!.platform {
            case .apns: ("AppleRegistrationDescription", "DeviceToken")
            case .fcm: ("FcmV1RegistrationDescription", "FcmV1RegistrationId")
            default: ("WindowsRegistrationDescription", "ChannelUri")
            }
        let handle = device.address!.platform == .wns ? "https://db5.notify.windows.com/wns/\(device.address!.token)" : device.address!.token
        let put = try await sdk.createOrUpdate(id: id!, element: element, handleElement: handleElement, handle: handle, tags: tags)
        guard put.status == 200 else { throw UnexpectedStatus(call: "PUT registration", response: put) }
        return id!
    }

    @Test func tagExpressionsReachExactlyTheDevicesTheySelect() async throws {
        let settings = NotificationHub.Settings(namespace: "fanout", hubName: "hub")
        try await TestSystem.run(.withHub(settings)) { system in
            let sdk = DotNetHubWire(base: system.pushService, settings: settings)
            var rng = SplitMix64(seed: 13)
            let alphabet = ["red", "blue", "user:1", "user:2", "beta"]
            var devices: [(TestDevice, Set<String>)] = []
            for index in 0..<12 {
                let platform: Platform = [.apns, .fcm, .wns][index % 3]
                let device = try await TestDevice.connect(pushService: system.pushService, platform: platform)
                let tags = Set(alphabet.filter { _ in rng.next() % 2 == 0 })
                _ = try await Self.register(sdk, device, tags: tags.sorted())
                devices.append((device, tags))
            }
            defer { devices.forEach { $0.0.close() } }
            let expressions = [
                "red", "red || blue", "red && !blue", "(user:1 || user:2) && beta", "!red", "!(red || blue || beta)", "red && blue && beta",
            ]
            var expected = Array(repeating: 0, count: devices.count)
            var excluded = 0
            for (number, text) in expressions.enumerated() {
                let expression = try TagExpression.parse(text)
                // One template send reaches every template registration; native sends go per platform.
                for (format, body, headers) in [
                    ("apple", #"{"aps":{"alert":"n\#(number)"}}"#, [(String, String)]()),
                    ("fcmv1", #"{"message":{"data":{"n":"\#(number)"}}}"#, []),
                    ("windows", "<toast><visual><binding template=\"ToastText01\"><text id=\"1\">n\(number)</text></binding></visual></toast>", []),
                ] {
                    let response = try await sdk.request(
                        .POST, "messages", body: Data(body.utf8), headers: [("ServiceBusNotification-Format", format), ("ServiceBusNotification-Tags", text)] + headers
                    )
                    #expect(response.status == 201, "\(text) \(format): \(response.text)")
                }
                for (index, device) in devices.enumerated() {
                    if expression.matches(device.1) { expected[index] += 1 } else { excluded += 1 }
                }
            }
            for (index, (device, _)) in devices.enumerated() where expected[index] > 0 {
                _ = try await device.waitForPushes(expected[index])
            }
            try await Task.sleep(for: .milliseconds(150))
            for (index, (device, tags)) in devices.enumerated() {
                #expect(device.pushes.count == expected[index], "device \(index) \(device.address!.platform) tags \(tags.sorted())")
            }
            // Sends the expressions kept from some devices prove the negative cases.
            #expect(excluded > 0 && expected.contains { $0 > 0 })
        }
    }

    @Test func templatesInstallationsAndDirectSends() async throws {
        let settings = NotificationHub.Settings(namespace: "templates", hubName: "hub")
        try await TestSystem.withHub(settings, devices: [.apns, .fcm, .wns]) { _, sdk, devices in
            let (apple, android, windows) = (devices[0], devices[1], devices[2])
            // An Apple template registration in Atom XML.
            let (_, id) = try await sdk.createRegistrationID()
            let template = """
                <entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><AppleTemplateRegistrationDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><RegistrationId i:nil="true"/><Tags>news</Tags><DeviceToken>\(apple.address!.token)</DeviceToken><BodyTemplate><![CDATA[{"aps":{"alert":"$(title, 8)","badge":"#(count)"},"who":"{'Hi, ' + $(name)}"}]]></BodyTemplate><TemplateName>alert</TemplateName></AppleTemplateRegistrationDescription></content></entry>
                """
            let put = try await sdk.request(.PUT, "registrations/\(id!)", body: Data(template.utf8), headers: [("Content-Type", "application/atom+xml;type=entry;charset=utf-8")])
            #expect(put.status == 200, "\(put.text)")
            #expect(put.text.contains("<AppleTemplateRegistrationDescription") && put.text.contains("<BodyTemplate><![CDATA["))
            // An FCM v1 installation with a template, and a Windows installation with a raw one.
            let installation = #"{"installationId":"inst-1","platform":"fcmv1","pushChannel":"\#(android.address!.token)","tags":["news"],"templates":{"t":{"body":"{\"message\":{\"data\":{\"title\":\"$(title)\",\"url\":\"%(link)\"}}}"}}}"#
            #expect(try await sdk.request(.PUT, "installations/inst-1", body: Data(installation.utf8), headers: [("Content-Type", "application/json")]).status == 200)
            let wns = #"{"installationId":"inst-2","platform":"wns","pushChannel":"https://db5.notify.windows.com/wns/\#(windows.address!.token)","templates":{"raw":{"body":"<x t=\"$(title)\"/>","headers":{"X-WNS-Type":"wns/raw"},"tags":["news"]}}}"#
            #expect(try await sdk.request(.PUT, "installations/inst-2", body: Data(wns.utf8)).status == 200)
            let read = try await sdk.request(.GET, "installations/inst-1")
            #expect(read.status == 200)
            #expect(read.text.hasPrefix(#"{"installationId":"inst-1","pushChannel":""#))
            // A template send reaches every template registration selected, each in its own format.
            let properties = #"{"title":"Breaking news today","count":"3","name":"Ann","link":"a b&c"}"#
            let sent = try await sdk.request(
                .POST, "messages", body: Data(properties.utf8), headers: [("ServiceBusNotification-Format", "template"), ("ServiceBusNotification-Tags", "news")]
            )
            #expect(sent.status == 201)
            let applePush = try await apple.waitForPushes(1)[0]
            let aps = try JSONSerialization.jsonObject(with: Data(applePush.body.utf8)) as? [String: Any]
            #expect((aps?["aps"] as? [String: Any])?["alert"] as? String == "Breaking")
            #expect((aps?["aps"] as? [String: Any])?["badge"] as? Int == 3, "#(count) of a number is a JSON number")
            #expect(aps?["who"] as? String == "Hi, Ann")
            let fcmPush = try await android.waitForPushes(1)[0]
            #expect(fcmPush.body.contains(#""title":"Breaking news today""#) && fcmPush.body.contains(#""url":"a%20b%26c""#))
            let wnsPush = try await windows.waitForPushes(1)[0]
            #expect(wnsPush.body == #"<x t="Breaking news today"/>"#)
            #expect(wnsPush.pushType == "wns/raw")
            // The installation's implicit tag, after a JSON Patch of its tags.
            let patch = #"[{"op":"add","path":"/tags","value":"vip"},{"op":"remove","path":"/tags/news"}]"#
            #expect(try await sdk.request(.PATCH, "installations/inst-1", body: Data(patch.utf8), headers: [("Content-Type", "application/json-patch+json")]).status == 200)
            #expect(try await sdk.request(.GET, "installations/inst-1").text.contains(#""tags":["vip"]"#))
            let native = #"{"message":{"data":{"k":"v"}}}"#
            let byInstallation = try await sdk.request(
                .POST, "messages", body: Data(native.utf8),
                headers: [("ServiceBusNotification-Format", "fcmv1"), ("ServiceBusNotification-Tags", "$InstallationId:{inst-1} && vip")]
            )
            #expect(byInstallation.status == 201)
            _ = try await android.waitForPushes(2)
            // A direct send needs no registration.
            let direct = try await sdk.request(
                .POST, "messages", query: "&direct", body: Data(#"{"aps":{"content-available":1}}"#.utf8),
                headers: [("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-DeviceHandle", apple.address!.token)]
            )
            #expect(direct.status == 201)
            #expect(direct.headers.first(name: "Location")?.hasSuffix("&direct") == true)
            let silent = try await apple.waitForPushes(2)[1]
            #expect(silent.pushType == "background")
            #expect(try await sdk.request(.DELETE, "installations/inst-1").status == 204)
            #expect(try await sdk.request(.GET, "installations/inst-1").status == 404)
        }
    }

    @Test func aHandleThePushServiceDeclaresDeadLosesItsRegistrations() async throws {
        let settings = NotificationHub.Settings(namespace: "feedback", hubName: "hub")
        try await TestSystem.withHub(settings, devices: [.apns]) { system, sdk, devices in
            let device = devices[0]
            let id = try await Self.register(sdk, device, tags: ["t"])
            let faults = #"{"unregisteredTokens":["\#(device.address!.token)"]}"#
            let admin = try await TestHTTP.request(.PUT, "\(system.pushService)/admin/faults", auth: .bearer(system.adminToken!), body: Data(faults.utf8))
            #expect(admin.status == 200)
            #expect(try await sdk.send(format: "apple", body: #"{"aps":{"alert":"x"}}"#, tags: ["t"]).status == 201)
            #expect(try await sdk.request(.GET, "registrations/\(id)").status == 404, "APNs answered 410: the hub removed the registration")
            #expect(try await sdk.send(format: "apple", body: #"{"aps":{"alert":"x"}}"#, tags: ["t"]).status == 201)
            try await device.waitFor { $0.rawFrames.count >= 2 }
            try await Task.sleep(for: .milliseconds(150))
            let refused = device.rawFrames.filter { $0.contains(#""type":"refused""#) }
            #expect(refused.count == 1, "the hub stopped sending to the dead token after the first refusal")
        }
    }

    @Test func registrationQueriesPageWithContinuationTokens() async throws {
        let settings = NotificationHub.Settings(namespace: "paging", hubName: "hub")
        try await TestSystem.run(.withHub(settings)) { system in
            let sdk = DotNetHubWire(base: system.pushService, settings: settings)
            var created = Set<String>()
            for index in 0..<7 {
                let token = String(format: "%064x", index + 1)
                let put = try await sdk.createOrUpdate(id: "r\(index)", element: "AppleRegistrationDescription", handleElement: "DeviceToken", handle: token, tags: ["all"])
                #expect(put.status == 200)
                created.insert("r\(index)")
            }
            var seen: [String] = []
            var continuation: String?
            var pages = 0
            repeat {
                let query = "&$top=3" + (continuation.map { "&continuationtoken=\($0)" } ?? "")
                let page = try await sdk.request(.GET, "tags/all/registrations", query: query)
                #expect(page.status == 200)
                seen += DotNetHubWire.entries(page).map(\.id)
                continuation = page.headers.first(name: "x-ms-continuationtoken")
                pages += 1
            } while continuation != nil && pages < 10
            #expect(pages == 3)
            #expect(seen.count == 7 && Set(seen) == created)
        }
    }
}
