import Foundation
import NIOHTTP1
import PushFleetCore
import PushFleetEmbedded
import PushFleetHub
import PushFleetMockPush
import PushFleetTestSupport
import PushFleetWire
import Testing

/// The hub against Microsoft's REST reference: requests shaped as the reference shows them
/// (Atom entries, JSON installations, `POST …/messages`), answers checked for status, headers
/// and the service's `<Error>` body.
@Suite("Notification hub fidelity")
struct HubFidelityTests {
    static let atom = "http://www.w3.org/2005/Atom"
    static let hubNS = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
    static let entryType = [("Content-Type", "application/atom+xml;type=entry;charset=utf-8"), ("x-ms-version", "2015-01")]

    /// A registration as the reference's "Create registration" example writes it.
    static func appleEntry(token: String, tags: String = "t") -> String {
        """
        <?xml version="1.0" encoding="utf-8"?>
        <entry xmlns="\(atom)">
            <content type="application/xml">
                <AppleRegistrationDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="\(hubNS)">
                    <Tags>\(tags)</Tags>
                    <DeviceToken>\(token)</DeviceToken>
                </AppleRegistrationDescription>
            </content>
        </entry>
        """
    }

    static func windowsEntry(channel: String, tags: String) -> String {
        """
        <?xml version="1.0" encoding="utf-8"?>
        <entry xmlns="\(atom)"><content type="application/xml"><WindowsRegistrationDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="\(hubNS)"><Tags>\(tags)</Tags><ChannelUri>\(XMLText.escape(channel))</ChannelUri></WindowsRegistrationDescription></content></entry>
        """
    }

    static let toast = #"<toast><visual><binding template="ToastText01"><text id="1">hi</text></binding></visual></toast>"#

    static func expectServiceError(_ response: TestResponse, _ status: Int, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == status, "\(context): \(response.status) \(response.text)", sourceLocation: sourceLocation)
        #expect(response.text.hasPrefix("<Error><Code>\(status)</Code><Detail>"), "\(context): \(response.text)", sourceLocation: sourceLocation)
        #expect(response.text.contains("TrackingId:"), "\(context)", sourceLocation: sourceLocation)
        #expect(response.headers.first(name: "TrackingId") != nil, "\(context)", sourceLocation: sourceLocation)
    }

    // MARK: WNS channel URIs

    @Test func wnsChannelURIsInWNSsOwnFormAreDelivered() async throws {
        let settings = NotificationHub.Settings(namespace: "wnsforms", hubName: "hub")
        try await TestSystem.withHub(settings, devices: [.wns, .wns, .wns]) { system, sdk, online in
            // WNS's tokens are base64: '+', '/' and '=', percent-encoded in the channel URI.
            let base64 = try await TestDevice.connect(pushService: system.pushService, platform: .wns, token: "AwYAAAD\(UInt32.random(in: 0...UInt32.max))+a/b==")
            defer { base64.close() }
            let devices = online + [base64]
            let tokens = devices.map { $0.address!.token }
            // What the push service mints over TLS, WNS's own root form, and a percent-encoded token.
            let channels = [
                "https://db5.notify.windows.com/w/?token=\(tokens[0])",
                "https://wns2-by3p.notify.windows.com/?token=\(tokens[1])",
                "https://cloud.notify.windows.com/w/?token=" + tokens[2].replacingOccurrences(of: "-", with: "%2D"),
                "https://db5.notify.windows.com/?token=" + tokens[3].replacingOccurrences(of: "+", with: "%2b").replacingOccurrences(of: "/", with: "%2f")
                    .replacingOccurrences(of: "=", with: "%3d"),
            ]
            for (index, channel) in channels.enumerated() {
                let put = try await sdk.request(
                    .PUT, "registrations/w\(index)", body: Data(Self.windowsEntry(channel: channel, tags: "d\(index),all").utf8), headers: Self.entryType
                )
                #expect(put.status == 200, "\(put.text)")
            }
            // A native send to a tag list, a template registration's send, and a direct send.
            for index in channels.indices {
                let sent = try await sdk.send(format: "windows", body: Self.toast, tags: ["d\(index)"], contentType: "application/xml", headers: [("X-WNS-Type", "wns/toast")])
                #expect(sent.status == 201)
            }
            let direct = try await sdk.request(
                .POST, "messages", query: "&direct", body: Data(Self.toast.utf8),
                headers: [("ServiceBusNotification-Format", "windows"), ("ServiceBusNotification-DeviceHandle", channels[0]), ("X-WNS-Type", "wns/toast"), ("Content-Type", "application/xml")]
            )
            #expect(direct.status == 201)
            let installation = #"{"installationId":"wi","platform":"wns","pushChannel":"\#(channels[1])","templates":{"t":{"body":"<toast><visual><binding template=\"ToastText01\"><text id=\"1\">$(m)</text></binding></visual></toast>","headers":{"X-WNS-Type":"wns/toast"}}}}"#
            #expect(try await sdk.request(.PUT, "installations/wi", body: Data(installation.utf8)).status == 200)
            let template = try await sdk.request(
                .POST, "messages", body: Data(#"{"m":"t"}"#.utf8), headers: [("ServiceBusNotification-Format", "template"), ("ServiceBusNotification-Tags", "$InstallationId:{wi}")]
            )
            #expect(template.status == 201)
            let expected = [2, 2, 1, 1]
            for (index, device) in devices.enumerated() {
                let pushes = try await device.waitForPushes(expected[index])
                #expect(pushes.count == expected[index], "channel \(channels[index])")
                #expect(pushes.allSatisfy { $0.token == tokens[index] && $0.pushType == "wns/toast" })
            }
            // Each registration still stands: nothing was taken for a dead channel.
            for index in channels.indices { #expect(try await sdk.request(.GET, "registrations/w\(index)").status == 200) }
        }
    }

    // MARK: Well-formed XML only

    /// Registration bodies that are not well-formed XML, or not the reference's namespaces.
    static let malformed: [(String, String)] = {
        let good = appleEntry(token: String(repeating: "ab", count: 32))
        return [
            ("end tags cut off", String(good[..<good.range(of: "</AppleRegistrationDescription>")!.lowerBound])),
            ("the root's end tag cut off", String(good[..<good.range(of: "</entry>")!.lowerBound])),
            ("text after the root element", good + "trailing"),
            ("a second root element", good + "<entry/>"),
            ("an undeclared namespace prefix", good.replacingOccurrences(of: "<Tags>t</Tags>", with: "<x:Tags>t</x:Tags>")),
            ("an undeclared attribute prefix", good.replacingOccurrences(of: "<Tags>", with: "<Tags y:z=\"1\">")),
            ("mismatched tags", good.replacingOccurrences(of: "</Tags>", with: "</Tag>")),
            ("a bare ampersand", good.replacingOccurrences(of: "<Tags>t</Tags>", with: "<Tags>a&b</Tags>")),
            ("an undefined entity", good.replacingOccurrences(of: "<Tags>t</Tags>", with: "<Tags>&nbsp;</Tags>")),
            ("a duplicate attribute", good.replacingOccurrences(of: "type=\"application/xml\"", with: "type=\"a\" type=\"b\"")),
            ("'<' in an attribute value", good.replacingOccurrences(of: "type=\"application/xml\"", with: "type=\"a<b\"")),
            ("'--' in a comment", good.replacingOccurrences(of: "<Tags>", with: "<!-- a -- b --><Tags>")),
            ("a control character", good.replacingOccurrences(of: "<Tags>t</Tags>", with: "<Tags>t\u{1}</Tags>")),
            ("an XML declaration not at the start", "\n" + good),
            ("the entry outside the Atom namespace", good.replacingOccurrences(of: "xmlns=\"\(atom)\"", with: "xmlns=\"urn:not-atom\"")),
            ("the description outside the hub namespace", good.replacingOccurrences(of: "xmlns=\"\(hubNS)\"", with: "xmlns=\"urn:not-the-hub\"")),
            ("the description in no namespace", good.replacingOccurrences(of: " xmlns=\"\(hubNS)\"", with: "")),
            ("content outside the Atom namespace", good.replacingOccurrences(of: "<content type=\"application/xml\">", with: "<content xmlns=\"urn:x\" type=\"application/xml\">")),
        ]
    }()

    @Test func registrationXMLThatIsNotWellFormedIsRefusedWith400() async throws {
        let settings = NotificationHub.Settings(namespace: "wellformed", hubName: "hub")
        try await TestSystem.run(.withHub(settings)) { system in
            let sdk = DotNetHubWire(base: system.pushService, settings: settings)
            let good = Self.appleEntry(token: String(repeating: "ab", count: 32))
            #expect(try await sdk.request(.PUT, "registrations/good", body: Data(good.utf8), headers: Self.entryType).status == 200)
            for (index, (what, body)) in Self.malformed.enumerated() {
                let put = try await sdk.request(.PUT, "registrations/bad\(index)", body: Data(body.utf8), headers: Self.entryType)
                Self.expectServiceError(put, 400, what)
                #expect(try await sdk.request(.GET, "registrations/bad\(index)").status == 404, "\(what) was stored")
            }
            // Bytes that are not UTF-8.
            var invalid = Data(good.utf8)
            invalid.replaceSubrange(invalid.range(of: Data("<Tags>t".utf8))!, with: Data("<Tags>".utf8) + Data([0xC3, 0x28]))
            Self.expectServiceError(try await sdk.request(.PUT, "registrations/utf8", body: invalid, headers: Self.entryType), 400, "bad UTF-8")
        }
    }

    // MARK: DTDs in any encoding

    static func utf16(_ text: String, bigEndian: Bool, bom: Bool) -> Data {
        var data = Data()
        if bom { data += bigEndian ? [0xFE, 0xFF] : [0xFF, 0xFE] }
        for unit in text.utf16 {
            data += bigEndian ? [UInt8(unit >> 8), UInt8(unit & 0xFF)] : [UInt8(unit & 0xFF), UInt8(unit >> 8)]
        }
        return data
    }

    static func utf32(_ text: String, bigEndian: Bool) -> Data {
        var data = Data(bigEndian ? [0, 0, 0xFE, 0xFF] : [0xFF, 0xFE, 0, 0])
        for scalar in text.unicodeScalars {
            let v = scalar.value
            let bytes = [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
            data += bigEndian ? bytes : bytes.reversed()
        }
        return data
    }

    @Test func aDoctypeIsRefusedInEveryEncoding() async throws {
        let settings = NotificationHub.Settings(namespace: "doctypes", hubName: "hub")
        try await TestSystem.run(.withHub(settings)) { system in
            let sdk = DotNetHubWire(base: system.pushService, settings: settings)
            let token = String(repeating: "cd", count: 32)
            let body = Self.appleEntry(token: token)
            let plain = body.replacingOccurrences(of: "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n", with: "")
            let declared16 = "<?xml version=\"1.0\" encoding=\"utf-16\"?>\n" + plain
            let bomb = "<!DOCTYPE entry [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;\">]>\n"
            let withDTD16 = "<?xml version=\"1.0\" encoding=\"utf-16\"?>\n" + bomb + plain.replacingOccurrences(of: "<Tags>t</Tags>", with: "<Tags>&b;</Tags>")
            let documents: [(String, Data)] = [
                ("UTF-16 LE with a BOM", Self.utf16(withDTD16, bigEndian: false, bom: true)),
                ("UTF-16 BE with a BOM", Self.utf16(withDTD16, bigEndian: true, bom: true)),
                ("UTF-16 LE without a BOM", Self.utf16(withDTD16, bigEndian: false, bom: false)),
                ("UTF-16 BE without a BOM", Self.utf16(withDTD16, bigEndian: true, bom: false)),
                ("UTF-32 LE", Self.utf32(withDTD16.replacingOccurrences(of: "utf-16", with: "utf-32"), bigEndian: false)),
                ("UTF-32 BE", Self.utf32(withDTD16.replacingOccurrences(of: "utf-16", with: "utf-32"), bigEndian: true)),
                ("UTF-8 with a BOM", Data([0xEF, 0xBB, 0xBF]) + Data(withDTD16.replacingOccurrences(of: "utf-16", with: "utf-8").utf8)),
                ("lower-case doctype", Data(("<!doctype entry>" + plain).utf8)),
            ]
            for (index, (what, data)) in documents.enumerated() {
                let put = try await sdk.request(.PUT, "registrations/dtd\(index)", body: data, headers: Self.entryType)
                Self.expectServiceError(put, 400, what)
                #expect(try await sdk.request(.GET, "registrations/dtd\(index)").status == 404, "\(what) was stored")
            }
            // The same registration without a DTD is read in UTF-16 as in UTF-8.
            for (index, data) in [Self.utf16(declared16, bigEndian: false, bom: true), Self.utf16(declared16, bigEndian: true, bom: true)].enumerated() {
                let put = try await sdk.request(.PUT, "registrations/u16-\(index)", body: data, headers: Self.entryType)
                #expect(put.status == 200, "\(put.text)")
                #expect(put.text.contains("<DeviceToken>\(token)</DeviceToken>") && put.text.contains("<Tags>t</Tags>"))
            }
        }
    }

    // MARK: APNs tokens in upper case

    @Test func anAPNsTokenInUpperCaseReachesItsDevice() async throws {
        let settings = NotificationHub.Settings(namespace: "tokencase", hubName: "hub")
        try await TestSystem.withHub(settings, devices: [.apns, .apns]) { system, sdk, devices in
            let (first, second) = (devices[0], devices[1])
            let upper = first.address!.token.uppercased()
            #expect(upper != first.address!.token)
            let put = try await sdk.request(.PUT, "registrations/upper", body: Data(Self.appleEntry(token: upper, tags: "up").utf8), headers: Self.entryType)
            #expect(put.status == 200)
            let alert = #"{"aps":{"alert":"x"}}"#
            #expect(try await sdk.send(format: "apple", body: alert, tags: ["up"]).status == 201)
            let direct = try await sdk.request(
                .POST, "messages", query: "&direct", body: Data(alert.utf8),
                headers: [("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-DeviceHandle", upper)]
            )
            #expect(direct.status == 201)
            let installation = #"{"installationId":"ui","platform":"apns","pushChannel":"\#(second.address!.token.uppercased())","tags":["inst"]}"#
            #expect(try await sdk.request(.PUT, "installations/ui", body: Data(installation.utf8)).status == 200)
            #expect(try await sdk.send(format: "apple", body: alert, tags: ["inst"]).status == 201)
            #expect(try await first.waitForPushes(2).count == 2)
            #expect(try await second.waitForPushes(1).count == 1)
            // The push service takes the token in either case, and nothing waits for an offline twin.
            let pushed = try await system.apnsPush(token: first.address!.token.uppercased(), body: alert)
            #expect(pushed.status == 200)
            #expect(try await first.waitForPushes(3).count == 3)
            let stats = try await system.pushStats()
            #expect(stats.stored == 0, "pushes held for a device that is not there: \(stats)")
        }
    }

    @Test func aDeviceOnlineUnderAnUpperCaseTokenGetsPushesToItsLowerCaseForm() async throws {
        try await TestSystem.run { system in
            let token = TestDevice.randomToken(for: .apns)
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .apns, token: token.uppercased())
            defer { device.close() }
            #expect(try await system.apnsPush(token: token, body: #"{"aps":{"alert":"x"}}"#).status == 200)
            #expect(try await device.waitForPushes(1).count == 1)
        }
    }
}

/// Stopping the push service while hub sends fan out.
@Suite("Notification hub shutdown")
struct HubShutdownTests {
    @Test func stoppingWhileSendsFanOutIsPrompt() async throws {
        // Every push throttled and retried nine times, waits drawn up to 60 s and doubling: a
        // send left to finish takes minutes, its slowest of 300 pushes longer still, so a bound
        // of a minute tells a prompt stop from one that waits, even on a starved machine. The
        // servers may take a minute to stop, so only the hub's own promptness is measured.
        let settings = NotificationHub.Settings(namespace: "stopping", hubName: "hub", maxAttempts: 10, backoff: .seconds(60))
        let stoppedAt = try await TestSystem.run(.withHub(settings), shutdownWithin: .seconds(300)) { system in
            try await system.setFaults(FaultSettings(throttle: 1))
            let sdk = DotNetHubWire(base: system.pushService, settings: settings)
            for index in 0..<100 {
                let put = try await sdk.createOrUpdate(
                    id: "s\(index)", element: "AppleRegistrationDescription", handleElement: "DeviceToken", handle: String(format: "%064x", index + 1), tags: ["all"]
                )
                guard put.status == 200 else { throw UnexpectedStatus(call: "PUT registration", response: put) }
            }
            for _ in 0..<3 {
                Task { _ = try? await sdk.send(format: "apple", body: #"{"aps":{"alert":"x"}}"#, tags: ["all"]) }
            }
            try await Task.sleep(for: .milliseconds(500))
            return ContinuousClock.now
        }
        let took = ContinuousClock.now - stoppedAt
        #expect(took < .seconds(60), "stopping took \(took)")
    }
}

/// The strict well-formedness check alone: pure, no sockets.
@Suite("Strict XML")
struct StrictXMLTests {
    static let wellFormed = [
        "<a/>",
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<!-- c --><?pi data?><a b='1' c=\"&lt;&#x41;&#66;\">t<![CDATA[<&]]>&amp;<b/></a>\n<!-- after -->\n",
        "<p:a xmlns:p=\"urn:p\" p:b=\"1\" b=\"2\"><c xmlns=\"urn:d\"><d xmlns=\"\"/></c></p:a>",
        "<a xml:lang=\"en\">é ü 漢字 \u{1F600}</a>",
    ]

    static let notWellFormed = [
        "", "   ", "text", "<a>", "<a></b>", "<a/><b/>", "<a/>text", "text<a/>", "<a b=1/>", "<a b=\"1\" b=\"2\"/>", "<a b=\"<\"/>",
        "<a>&foo;</a>", "<a>a & b</a>", "<a>&#0;</a>", "<a>&#xD800;</a>", "<a>]]></a>", "<a><!-- a -- b --></a>", "<a>\u{1}</a>",
        "<x:a/>", "<a x:b=\"1\"/>", "<a xmlns:p=\"\"/>", "<a xmlns:x=\"u\" xmlns:y=\"u\" x:b=\"1\" y:b=\"2\"/>", "<a:b:c xmlns:a=\"u\"/>",
        "<a><?xml version=\"1.0\"?></a>", " <?xml version=\"1.0\"?><a/>", "<!DOCTYPE a><a/>", "<a/><!DOCTYPE a>", "<a><![CDATA[x</a>",
        "<?xml version=\"2.0\"?><a/>", "<?xml encoding=\"utf-8\"?><a/>", "<?xml version=\"1.0\" encoding=\"utf-16\"?><a/>",
        "<?xml version=\"1.0\" encoding=\"ebcdic-cp-us\"?><a/>", "<1a/>", "<a><b></a></b>", "<a xmlns:xmlns=\"u\"/>", "<a xmlns:=\"u\"/>",
        "<a xmlns:p:q=\"u\"/>",
    ]

    @Test func wellFormedDocumentsPassAndComeOutAsUTF8() throws {
        for text in Self.wellFormed {
            let out = try StrictXML.utf8Document(Data(text.utf8))
            #expect(String(decoding: out, as: UTF8.self) == text.replacingOccurrences(of: #"^<\?xml[^>]*\?>"#, with: "", options: .regularExpression), "\(text)")
            // The same characters in UTF-16 and UTF-32 come out the same.
            let undeclared = text.replacingOccurrences(of: " encoding=\"UTF-8\"", with: "")
            #expect(try StrictXML.utf8Document(HubFidelityTests.utf16(undeclared, bigEndian: true, bom: true)) == out, "\(text)")
            #expect(try StrictXML.utf8Document(HubFidelityTests.utf32(undeclared, bigEndian: false)) == out, "\(text)")
        }
    }

    @Test func anyWellFormednessErrorIsRefused() {
        for text in Self.notWellFormed {
            #expect(throws: StrictXML.Failure.self, "\(text)") { try StrictXML.utf8Document(Data(text.utf8)) }
        }
        for bytes: [UInt8] in [[0x3C, 0x61, 0xC3, 0x28, 0x2F, 0x3E], [0xFF, 0xFE, 0x3C], [0x4C, 0x6F, 0xA7, 0x94], [0xFE, 0xFF, 0xD8, 0x00, 0x00, 0x3C]] {
            #expect(throws: StrictXML.Failure.self, "\(bytes)") { try StrictXML.utf8Document(Data(bytes)) }
        }
    }

    @Test func aDTDIsRefusedWhateverTheEncoding() {
        let text = "<?xml version=\"1.0\"?><!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>"
        for data in [
            Data(text.utf8), HubFidelityTests.utf16(text, bigEndian: false, bom: true), HubFidelityTests.utf16(text, bigEndian: true, bom: false),
            HubFidelityTests.utf32(text, bigEndian: true), Data([0xEF, 0xBB, 0xBF]) + Data(text.utf8),
        ] {
            #expect(throws: StrictXML.Failure("a DTD is not allowed")) { try StrictXML.utf8Document(data) }
        }
    }
}
