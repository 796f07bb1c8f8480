import Foundation
import NIOHTTP1
import PushFleetEmbedded
import PushFleetHub
import PushFleetTestSupport
import PushFleetWire
import Testing

/// `$InstallationId:{…}` and `$UserId:{…}` are the hub's own tags: a registration or an
/// installation that could carry them would receive another device's or user's sends. The
/// service refuses them with 400 ("Tags can not start with $").
@Suite("Notification hub reserved tags")
struct HubReservedTagTests {
    static let hubNS = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"

    static func entry(token: String, tags: String) -> String {
        """
        <?xml version="1.0" encoding="utf-8"?>
        <entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><AppleRegistrationDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="\(hubNS)"><Tags>\(tags)</Tags><DeviceToken>\(token)</DeviceToken></AppleRegistrationDescription></content></entry>
        """
    }

    static func expectRefused(_ response: TestResponse, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == 400, "\(what): \(response.status) \(response.text)", sourceLocation: sourceLocation)
        #expect(response.text.hasPrefix("<Error><Code>400</Code><Detail>Tags can not start with $"), "\(what): \(response.text)", sourceLocation: sourceLocation)
        #expect(response.text.contains("TrackingId:"), "\(what)", sourceLocation: sourceLocation)
    }

    @Test func aListenKeyCannotTakeAnotherInstallationsOrUsersTags() async throws {
        let settings = NotificationHub.Settings(namespace: "reserved", hubName: "hub")
        try await TestSystem.withHub(settings, devices: [.apns, .apns]) { _, manager, devices in
            let (victim, thief) = (devices[0], devices[1])
            var device = manager
            device.keyName = NotificationHub.Settings.listenKeyName
            let victimInstallation = #"{"installationId":"victim","platform":"apns","pushChannel":"\#(victim.address!.token)","userId":"alice"}"#
            #expect(try await manager.request(.PUT, "installations/victim", body: Data(victimInstallation.utf8)).status == 200)
            let thiefToken = thief.address!.token
            let headers = [("Content-Type", "application/atom+xml;type=entry;charset=utf-8")]
            // Registrations (create, create-or-update, update), native and template.
            for (index, tags) in ["$InstallationId:{victim}", "$UserId:{alice}", "news,$UserId:{alice}", "$anything"].enumerated() {
                Self.expectRefused(
                    try await device.request(.PUT, "registrations/r\(index)", body: Data(Self.entry(token: thiefToken, tags: tags).utf8), headers: headers),
                    "PUT registration with \(tags)"
                )
                Self.expectRefused(
                    try await device.request(.POST, "registrations", body: Data(Self.entry(token: thiefToken, tags: tags).utf8), headers: headers),
                    "POST registration with \(tags)"
                )
            }
            // Installations: their tags, a template's tags, and JSON Patch adds and replaces.
            let put = #"{"installationId":"thief","platform":"apns","pushChannel":"\#(thiefToken)","tags":["$InstallationId:{victim}"]}"#
            Self.expectRefused(try await device.request(.PUT, "installations/thief", body: Data(put.utf8)), "installation tags")
            let templated = #"{"installationId":"thief","platform":"apns","pushChannel":"\#(thiefToken)","templates":{"t":{"body":"{\"aps\":{\"alert\":\"$(m)\"}}","tags":["$UserId:{alice}"]}}}"#
            Self.expectRefused(try await device.request(.PUT, "installations/thief", body: Data(templated.utf8)), "template tags")
            let plain = #"{"installationId":"thief","platform":"apns","pushChannel":"\#(thiefToken)","templates":{"t":{"body":"{\"aps\":{\"alert\":\"$(m)\"}}"}}}"#
            #expect(try await device.request(.PUT, "installations/thief", body: Data(plain.utf8)).status == 200)
            let patches = [
                #"[{"op":"add","path":"/tags","value":"$InstallationId:{victim}"}]"#,
                #"[{"op":"add","path":"/tags","value":["ok","$UserId:{alice}"]}]"#,
                #"[{"op":"replace","path":"/tags","value":["$UserId:{alice}"]}]"#,
                #"[{"op":"add","path":"/templates/t/tags","value":["$InstallationId:{victim}"]}]"#,
                #"[{"op":"add","path":"/templates/u","value":{"body":"{}","tags":["$UserId:{alice}"]}}]"#,
            ]
            for patch in patches {
                Self.expectRefused(
                    try await device.request(.PATCH, "installations/thief", body: Data(patch.utf8), headers: [("Content-Type", "application/json-patch+json")]),
                    "PATCH \(patch)"
                )
            }
            // Nothing of the above took: sends to the victim's installation and user reach the victim alone.
            let alert = #"{"aps":{"alert":"for alice"}}"#
            #expect(try await manager.send(format: "apple", body: alert, tags: ["$InstallationId:{victim}"]).status == 201)
            #expect(try await manager.send(format: "apple", body: alert, tags: ["$UserId:{alice}"]).status == 201)
            #expect(try await manager.request(.POST, "messages", body: Data(#"{"m":"x"}"#.utf8), headers: [("ServiceBusNotification-Format", "template"), ("ServiceBusNotification-Tags", "$UserId:{alice}")]).status == 201)
            #expect(try await victim.waitForPushes(2).count == 2)
            try await Task.sleep(for: .milliseconds(150))
            #expect(thief.pushes.isEmpty, "the thief's device read the victim's notifications")
            // The installation's own tags are still readable where the service shows them: not in its JSON.
            #expect(!(try await manager.request(.GET, "installations/victim").text.contains("$")))
        }
    }
}
