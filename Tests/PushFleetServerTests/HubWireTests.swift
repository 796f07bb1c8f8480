import Foundation
import NIOHTTP1
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetHub
import PushFleetTestSupport
import PushFleetWire
import Testing

/// The notification hub over real sockets, driven as the official .NET SDK drives it: the seed
/// backend's five calls, then the documented errors.
@Suite("Notification hub on the wire")
struct HubWireTests {
    @Test func theSeedBackendsHubCallsAsTheDotNetSDKSendsThem() async throws {
        let settings = NotificationHub.Settings(namespace: "seedns", hubName: "seedhub")
        try await TestSystem.withHub(settings, devices: [.apns, .fcm, .apns]) { _, sdk, devices in
            let (phone, android, other) = (devices[0], devices[1], devices[2])
            let token = phone.address!.token

            // POST api/register?handle=: GetRegistrationsByChannelAsync finds nothing yet…
            let empty = try await sdk.registrationsByChannel(token)
            #expect(empty.status == 200)
            #expect(empty.headers.first(name: "Content-Type") == "application/atom+xml; type=feed; charset=utf-8")
            #expect(empty.text.hasPrefix("<feed xmlns=\"http://www.w3.org/2005/Atom\"><title type=\"text\">Registrations</title>"))
            #expect(DotNetHubWire.entries(empty).isEmpty)
            // …so CreateRegistrationIdAsync, whose id the SDK reads from the Location.
            let (created, id) = try await sdk.createRegistrationID()
            #expect(created.status == 201)
            #expect(created.headers.first(name: "Location")?.hasPrefix("https://seedns.servicebus.windows.net/seedhub/registrationids/") == true)
            let registrationID = try #require(id)

            // PUT api/register/{id}: CreateOrUpdateRegistrationAsync(new AppleRegistrationDescription(handle)).
            let put = try await sdk.createOrUpdate(
                id: registrationID, element: "AppleRegistrationDescription", handleElement: "DeviceToken", handle: token, tags: ["username:bob", "extra"]
            )
            #expect(put.status == 200)
            #expect(put.headers.first(name: "ETag") == "W/\"1\"")
            #expect(put.headers.first(name: "Content-Type") == "application/atom+xml; type=entry; charset=utf-8")
            #expect(put.text.contains("<AppleRegistrationDescription xmlns=\"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect\" xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\"><ETag>1</ETag><ExpirationTime>9999-12-31T23:59:59.9999999Z</ExpirationTime><RegistrationId>\(registrationID)</RegistrationId><Tags>username:bob,extra</Tags><DeviceToken>\(token)</DeviceToken></AppleRegistrationDescription>"))
            // The same PUT again is an update: the ETag moves on.
            let again = try await sdk.createOrUpdate(
                id: registrationID, element: "AppleRegistrationDescription", handleElement: "DeviceToken", handle: token, tags: ["username:bob"]
            )
            #expect(again.headers.first(name: "ETag") == "W/\"2\"")
            // The legacy FcmRegistrationDescription the seed writes for "fcm" comes back as Gcm.
            let (_, fcmID) = try await sdk.createRegistrationID()
            let fcmPut = try await sdk.createOrUpdate(
                id: try #require(fcmID), element: "FcmRegistrationDescription", handleElement: "FcmRegistrationId", handle: android.address!.token,
                tags: ["username:bob"]
            )
            #expect(fcmPut.status == 200)
            #expect(fcmPut.text.contains("<GcmRegistrationDescription"))
            #expect(fcmPut.text.contains("<GcmRegistrationId>\(android.address!.token)</GcmRegistrationId>"))
            // Another registration of the same handle: the seed keeps the first and deletes the
            // others with DeleteRegistrationAsync(registration), which sends the ETag.
            let (_, duplicateID) = try await sdk.createRegistrationID()
            _ = try await sdk.createOrUpdate(
                id: try #require(duplicateID), element: "AppleRegistrationDescription", handleElement: "DeviceToken", handle: token.uppercased(), tags: ["username:bob"]
            )
            let both = DotNetHubWire.entries(try await sdk.registrationsByChannel(token))
            #expect(Set(both.map(\.id)) == [registrationID, duplicateID!], "APNs tokens match without regard to case")
            let stale = try await sdk.deleteRegistration(duplicateID!, etag: "7")
            #expect(stale.status == 412, "an ETag that does not match is a failed precondition")
            #expect(try await sdk.deleteRegistration(duplicateID!, etag: both.first { $0.id == duplicateID }!.etag).status == 200)

            // POST api/notifications: SendAppleNativeNotificationAsync(alert, userTag) and the FCM one.
            let alert = #"{"aps":{"alert":"From alice: hi"}}"#
            let sent = try await sdk.send(format: "apple", body: alert, tags: ["username:bob", "from:alice"], contentType: "application/json;charset=utf-8")
            #expect(sent.status == 201)
            let location = try #require(sent.headers.first(name: "Location"))
            #expect(location.hasPrefix("https://seedns.servicebus.windows.net/seedhub/messages/") && location.hasSuffix("?api-version=2020-06"))
            #expect(sent.headers.first(name: "TrackingId") != nil)
            let pushes = try await phone.waitForPushes(1)
            #expect(pushes.count == 1)
            #expect(pushes[0].body == alert)
            #expect(pushes[0].pushType == "alert")
            let data = #"{ "data" : {"message":"From alice: hi"}}"#
            #expect(try await sdk.send(format: "gcm", body: data, tags: ["username:bob", "from:alice"]).status == 201)
            let fcmPush = try await android.waitForPushes(1)[0]
            let message = try JSONSerialization.jsonObject(with: Data(fcmPush.body.utf8)) as? [String: [String: Any]]
            #expect(message?["message"]?["token"] as? String == android.address!.token)
            #expect((message?["message"]?["data"] as? [String: String]) == ["message": "From alice: hi"])
            // Nobody else's device heard anything.
            #expect(other.pushes.isEmpty)

            // DELETE api/register/{id}: DeleteRegistrationAsync(id) sends If-Match "*".
            #expect(try await sdk.deleteRegistration(registrationID).status == 200)
            #expect(try await sdk.request(.GET, "registrations/\(registrationID)").status == 404)
            #expect(try await sdk.deleteRegistration(registrationID).status == 404)
            #expect(try await sdk.send(format: "apple", body: alert, tags: ["username:bob"]).status == 201)
            try await Task.sleep(for: .milliseconds(200))
            #expect(phone.pushes.count == 1, "a deleted registration is sent nothing")
        }
    }

    @Test func authenticationFailuresAreTheDocumentedStatuses() async throws {
        let settings = NotificationHub.Settings(namespace: "authns", hubName: "hub")
        try await TestSystem.run(.withHub(settings)) { system in
            let good = DotNetHubWire(base: system.pushService, settings: settings)
            #expect(try await good.createRegistrationID().0.status == 201)
            var wrongKey = good
            wrongKey.key = NotificationHub.Settings.randomKey()
            #expect(try await wrongKey.createRegistrationID().0.status == 401)
            var expired = good
            expired.tokenLifetime = -10
            let stale = try await expired.createRegistrationID().0
            #expect(stale.status == 401)
            #expect(stale.text.contains("ExpiredToken"))
            #expect(stale.headers.first(name: "Content-Type") == "application/xml; charset=utf-8")
            var unknown = good
            unknown.keyName = "NoSuchRule"
            unknown.key = "0123456789abcdef0123"
            #expect(try await unknown.createRegistrationID().0.status == 401)
            let missing = try await TestHTTP.request(.POST, good.url("registrationids"))
            #expect(missing.status == 401)
            let garbage = try await TestHTTP.request(.POST, good.url("registrationids"), auth: .raw("SharedAccessSignature sr=%zz&sig=&se=x"))
            #expect(garbage.status == 401)
            // A token for another hub's path does not open this one.
            let elsewhere = SharedAccessSignature.token(
                resource: "http://authns.servicebus.windows.net/otherhub", keyName: good.keyName, key: settings.rules[0].key,
                expiry: Int64(Date().timeIntervalSince1970) + 60
            )
            #expect(try await TestHTTP.request(.POST, good.url("registrationids"), auth: .raw(elsewhere)).status == 401)
            // The listen-only key registers but may not send.
            var listen = good
            listen.keyName = NotificationHub.Settings.listenKeyName
            #expect(try await listen.createRegistrationID().0.status == 201)
            #expect(try await listen.send(format: "apple", body: #"{"aps":{}}"#, tags: ["a"]).status == 403)
            #expect(try await listen.request(.GET, "registrations").status == 403)
        }
    }

    @Test func malformedAndOversizedRequestsAreRefusedNotCrashed() async throws {
        let settings = NotificationHub.Settings(namespace: "badns", hubName: "hub")
        try await TestSystem.run(.withHub(settings)) { system in
            let sdk = DotNetHubWire(base: system.pushService, settings: settings)
            let entry = ["Content-Type": "application/atom+xml;type=entry;charset=utf-8"].map { ($0.key, $0.value) }
            // In the Atom and hub namespaces, so each is refused for what it shows, not for its namespace.
            func atom(_ description: String) -> String {
                "<entry xmlns=\"http://www.w3.org/2005/Atom\"><content>"
                    + description.replacingOccurrences(of: "RegistrationDescription>", with: "RegistrationDescription xmlns=\"\(RegistrationXML.hubNamespace)\">", options: [], range: description.range(of: "RegistrationDescription>"))
                    + "</content></entry>"
            }
            for body in [
                "", "<entry", "not xml at all \u{0}", "<entry xmlns=\"http://www.w3.org/2005/Atom\"><content/></entry>",
                "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;&a;\">]><entry>&b;</entry>",
                atom("<MpnsRegistrationDescription><ChannelUri>https://x/</ChannelUri></MpnsRegistrationDescription>"),
                atom("<AppleRegistrationDescription><Tags>bad tag!</Tags><DeviceToken>aa</DeviceToken></AppleRegistrationDescription>"),
                atom("<AppleRegistrationDescription><DeviceToken></DeviceToken></AppleRegistrationDescription>"),
                // The token after the body template is out of order, so ignored (as by the service's serializer): it is missing.
                atom("<AppleTemplateRegistrationDescription><BodyTemplate>{}</BodyTemplate><DeviceToken>aa</DeviceToken></AppleTemplateRegistrationDescription>"),
                String(repeating: "<a>", count: 5000),
            ] {
                let response = try await sdk.request(.PUT, "registrations/r1", body: Data(body.utf8), headers: entry)
                #expect(response.status == 400, "\(body.prefix(60)): \(response.status) \(response.text)")
            }
            // Members out of their declared order are ignored, as the service's serializer ignores them.
            let reordered = try await sdk.request(
                .PUT, "registrations/r1",
                body: Data(atom("<AppleRegistrationDescription><DeviceToken>aa</DeviceToken><Tags>ignored</Tags></AppleRegistrationDescription>").utf8),
                headers: entry
            )
            #expect(reordered.status == 200)
            #expect(!reordered.text.contains("ignored"))
            let tooLarge = try await sdk.request(.PUT, "registrations/r1", body: Data(repeating: 0x20, count: 70_000), headers: entry)
            #expect(tooLarge.status == 413)
            for (format, body, headers, status) in [
                ("apple", "not json", [(String, String)](), 400),
                ("apple", "{\"aps\":{\"alert\":\"\(String(repeating: "x", count: 5000))\"}}", [], 403),
                ("fcmv1", #"{"data":{}}"#, [], 400),
                ("windows", "raw bytes", [], 400),
                ("template", #"{"n":1}"#, [], 400),
                ("baidu", "{}", [], 400),
                ("apple", #"{"aps":{}}"#, [("ServiceBusNotification-Tags", "a && (b")], 400),
                ("apple", #"{"aps":{}}"#, [("ServiceBusNotification-Tags", "a && b && c && d && e && f && g")], 400),
            ] {
                let response = try await sdk.request(.POST, "messages", body: Data(body.utf8), headers: [("ServiceBusNotification-Format", format)] + headers)
                #expect(response.status == status, "\(format) \(body.prefix(40)) \(headers): \(response.status) \(response.text)")
            }
            let huge = try await sdk.request(.POST, "messages", body: Data(repeating: 0x7B, count: 65 * 1024), headers: [("ServiceBusNotification-Format", "apple")])
            #expect(huge.status == 413)
            #expect(try await sdk.request(.POST, "messages", body: Data("{}".utf8)).status == 400, "no format header")
            let direct = try await sdk.request(.POST, "messages", query: "&direct", body: Data(#"{"aps":{}}"#.utf8), headers: [("ServiceBusNotification-Format", "apple")])
            #expect(direct.status == 400, "a direct send needs a device handle")
            var otherHub = sdk
            otherHub.settings.hubName = "nohub"
            #expect(try await otherHub.createRegistrationID().0.status == 404)
            #expect(try await sdk.request(.GET, "registrations", query: "&$top=0").status == 400)
            #expect(try await sdk.request(.GET, "registrations", query: "&$filter=Tags%20eq%20'x'").status == 400)
            #expect(try await sdk.request(.PATCH, "installations/none", body: Data("[]".utf8)).status == 404)
            #expect(try await sdk.request(.PUT, "installations/i1", body: Data("{".utf8)).status == 400)
            #expect(try await sdk.request(.DELETE, "messages").status == 405)
            // The push service's own routes are untouched by the hub's.
            #expect(try await TestHTTP.request(.GET, "\(system.pushService)/health").status == 200)
        }
    }
}
