import Foundation
import NIOHTTP1
import PushFleetTestSupport
import PushFleetWire
import Testing

/// WNS refuses XML that is not well-formed, and XML 1.0 cannot carry U+0000–U+001F (but tab,
/// line feed and carriage return), U+FFFE or U+FFFF, not even as character references.
@Suite("WNS toast XML")
struct WNSXMLTests {
    static let hostile: [(name: String, scalar: String)] = [("U+0000", "\u{0}"), ("U+0001", "\u{1}"), ("U+FFFE", "\u{FFFE}")]

    @Test("the mock WNS refuses a toast that is not well-formed XML with 400, as WNS does, and takes raw bytes as they are")
    func mockRefusesMalformedToast() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let wns = "\(system.pushService)/wns/channel-xml"
            let auth = try await TestCredentials.wnsAuthorization(pushService: system.pushService)
            func post(_ body: String, type: String = "wns/toast") async throws -> TestResponse {
                try await TestHTTP.request(
                    .POST, wns, body: Data(body.utf8), headers: [("authorization", auth), ("X-WNS-Type", type), ("content-type", "text/xml")]
                )
            }
            let good = "<toast><visual><binding template=\"ToastText01\"><text id=\"1\">a &amp; b\tc\n</text></binding></visual></toast>"
            #expect(try await post(good).status == 200)
            for (name, scalar) in Self.hostile {
                let response = try await post("<toast><visual><binding template=\"ToastText01\"><text id=\"1\">x\(scalar)y</text></binding></visual></toast>")
                #expect(response.status == 400, "\(name)")
                #expect(response.headers.first(name: "X-WNS-Error-Description")?.contains("well-formed") == true, "\(name)")
            }
            for malformed in ["<toast>", "<toast></tile>", "a & b", "<toast><text>&#x1;</text></toast>", "<badge value=\"1\"/><badge/>"] {
                #expect(try await post(malformed).status == 400, "\(malformed)")
                #expect(try await post(malformed, type: "wns/badge").status == 400, "\(malformed)")
            }
            // A raw push is the app's own bytes: no XML rules apply.
            #expect(try await post("x\u{1}y", type: "wns/raw").status == 200)
            let stats = try await system.pushStats()
            #expect(stats.rejected["wns:400"] == 13)
        }
    }

    @Test("the backend refuses a WNS message with characters XML cannot carry, naming one, and sends nothing")
    func backendRefusesControlCharacters() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let device = try await system.device("wanda", .wns)
            for (name, scalar) in Self.hostile {
                let response = try await system.sendPlain(from: "bob", to: "wanda", pns: "wns", message: "hi\(scalar)there")
                #expect(response.status == 400, "\(name)")
                #expect(response.text.contains(name), "\(name): \(response.text)")
            }
            // JSON carries them: APNs and FCM are not affected.
            #expect(try await system.sendPlain(from: "bob", to: "wanda", pns: "apns", message: "hi\u{1}there").status == 200)
            // Tab, line feed, markup characters and text beyond the BMP go through, escaped.
            let fine = try await system.sendPlain(from: "bob", to: "wanda", pns: "wns", message: "a<b>&\"c'\t\n😀")
            #expect(fine.status == 200)
            let pushes = try await device.waitForPushes(1)
            #expect(pushes.count == 1)
            #expect(pushes[0].body.contains("a&lt;b&gt;&amp;&quot;c&apos;\t\n😀"))
            #expect(try await system.pushStats().rejected["wns:400"] == nil)
        }
    }
}
