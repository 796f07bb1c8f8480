import Foundation
import PropertyBased
import PushFleetCore
@testable import PushFleetHub
import PushFleetWebPush
import PushFleetTestSupport
import Testing

/// The hub's pure parts, without sockets: SAS tokens, connection strings, Atom XML, templates
/// and the registration store.
@Suite("Notification hub units")
struct HubUnitTests {
    // MARK: SAS

    static let key = "Wqh0zsdlgSX2kfp3S2PAG0tzGvzvc4FTfGqVbD/XkDY="
    static let rules = [SharedAccessSignature.Rule(keyName: "DefaultFullSharedAccessSignature", key: key, rights: [.listen, .send, .manage])]

    @Test func signsAsTheDotNetSDKDoes() {
        // Computed apart from this code (Python's hmac), for the URI the .NET SDK signs.
        let token = SharedAccessSignature.token(
            resource: "http://seedns.servicebus.windows.net/seedhub/registrations/abc/", keyName: "DefaultFullSharedAccessSignature", key: Self.key,
            expiry: 1_900_000_000
        )
        #expect(
            token
                == "SharedAccessSignature sr=http%3a%2f%2fseedns.servicebus.windows.net%2fseedhub%2fregistrations%2fabc%2f&sig=LobMvb1VZFlonyQVGL9zG7hvIitDSS2xdLy6Cn7XiUU%3d&se=1900000000&skn=DefaultFullSharedAccessSignature"
        )
    }

    @Test func verifiesTokensAgainstKeyExpiryAndAudience() {
        let hosts: Set<String> = ["seedns.servicebus.windows.net", "127.0.0.1"]
        let resource = "seedns.servicebus.windows.net/seedhub/registrations/abc"
        func check(_ audience: String, expiry: Int64 = 200, key: String = Self.key, now: Int64 = 100) -> Result<Set<SharedAccessSignature.Right>, SharedAccessSignature.Failure> {
            let token = SharedAccessSignature.token(resource: audience, keyName: "DefaultFullSharedAccessSignature", key: key, expiry: expiry)
            return SharedAccessSignature.verify(token, rules: Self.rules, resource: resource, hosts: hosts, now: now)
        }
        #expect((try? check("http://seedns.servicebus.windows.net/seedhub/registrations/abc/").get()) == [.listen, .send, .manage])
        #expect((try? check("https://seedns.servicebus.windows.net/").get()) != nil, "a namespace token covers every hub")
        #expect((try? check("sb://SEEDNS.servicebus.windows.net:443/seedhub").get()) != nil, "any scheme, port and case")
        #expect((try? check("http://127.0.0.1:8090/").get()) != nil, "the request's own host")
        #expect(check("http://seedns.servicebus.windows.net/seedhubx") == .failure(.wrongAudience("http://seedns.servicebus.windows.net/seedhubx")))
        #expect(check("http://other.servicebus.windows.net/seedhub") == .failure(.wrongAudience("http://other.servicebus.windows.net/seedhub")))
        #expect(check("http://seedns.servicebus.windows.net/seedhub/registrations/abc/def") == .failure(.wrongAudience("http://seedns.servicebus.windows.net/seedhub/registrations/abc/def")))
        #expect(check("http://seedns.servicebus.windows.net/", expiry: 100, now: 100) == .failure(.expired))
        #expect(check("http://seedns.servicebus.windows.net/", key: "another key of some length") == .failure(.badSignature))
        let valid = SharedAccessSignature.token(resource: "http://seedns.servicebus.windows.net/", keyName: "DefaultFullSharedAccessSignature", key: Self.key, expiry: 200)
        let tampered = valid.replacingOccurrences(of: "se=200", with: "se=900")
        #expect(SharedAccessSignature.verify(tampered, rules: Self.rules, resource: resource, hosts: hosts, now: 100) == .failure(.badSignature))
        #expect(SharedAccessSignature.verify(valid.replacingOccurrences(of: "DefaultFull", with: "Other"), rules: Self.rules, resource: resource, hosts: hosts, now: 100) == .failure(.unknownKey("OtherSharedAccessSignature")))
        #expect(SharedAccessSignature.verify(nil, rules: Self.rules, resource: resource, hosts: hosts, now: 100) == .failure(.missing))
        for garbage in ["Bearer x", "SharedAccessSignature ", "SharedAccessSignature sr=a&sig=b", "SharedAccessSignature sr=a&sig=%&se=1&skn=x", "SharedAccessSignature sr=a&sig=b&se=-1&skn=DefaultFullSharedAccessSignature"] {
            guard case .failure = SharedAccessSignature.verify(garbage, rules: Self.rules, resource: resource, hosts: hosts, now: 100) else {
                Issue.record("'\(garbage)' was accepted")
                continue
            }
        }
    }

    @Test func aRememberedTokenIsStillCheckedForExpiryAndAudience() {
        let cache = SharedAccessSignature.VerifiedCache()
        let hosts: Set<String> = ["ns.servicebus.windows.net"]
        let token = SharedAccessSignature.token(resource: "http://ns.servicebus.windows.net/hub", keyName: "DefaultFullSharedAccessSignature", key: Self.key, expiry: 200)
        let resource = "ns.servicebus.windows.net/hub/messages"
        #expect((try? cache.verify(token, rules: Self.rules, resource: resource, hosts: hosts, now: 100).get()) != nil)
        #expect((try? cache.verify(token, rules: Self.rules, resource: resource, hosts: hosts, now: 150).get()) != nil)
        #expect(cache.verify(token, rules: Self.rules, resource: resource, hosts: hosts, now: 200) == .failure(.expired))
        #expect(cache.verify(token, rules: Self.rules, resource: "ns.servicebus.windows.net/other/messages", hosts: hosts, now: 150) == .failure(.wrongAudience("http://ns.servicebus.windows.net/hub")))
        let otherKey = [SharedAccessSignature.Rule(keyName: "DefaultFullSharedAccessSignature", key: "a rotated key, not the one", rights: [.send])]
        #expect(cache.verify(token, rules: otherKey, resource: resource, hosts: hosts, now: 150) == .failure(.badSignature), "a rotated key is checked again")
    }

    @Test func compactStampsMatchTheCalendar() async {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMddHHmmss"
        await propertyCheck(count: 500, input: Gen.int64(in: 0...4_102_444_800)) { seconds in
            #expect(UTCStamp.compact(seconds: seconds) == formatter.string(from: Date(timeIntervalSince1970: Double(seconds))))
        }
    }

    @Test func parsesConnectionStrings() throws {
        let parsed = try HubConnectionString(
            parsing: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=DefaultFullSharedAccessSignature;SharedAccessKey=abc=;EntityPath=hub"
        )
        #expect(parsed.key == "abc=" && parsed.entityPath == "hub" && parsed.baseURL == "https://ns.servicebus.windows.net")
        #expect(try HubConnectionString(parsing: "Endpoint=http://127.0.0.1:8090/;SharedAccessKeyName=k;SharedAccessKey=v").baseURL == "http://127.0.0.1:8090")
        for bad in ["", "Endpoint=ftp://x/;SharedAccessKeyName=k;SharedAccessKey=v", "Endpoint=sb://x/;SharedAccessKey=v", "Endpoint=sb://x/;SharedAccessKeyName=k", "garbage"] {
            #expect(throws: HubConnectionString.ParseError.self) { try HubConnectionString(parsing: bad) }
        }
        #expect(try HubConnectionString(parsing: parsed.description) == parsed)
    }

    // MARK: Atom XML

    @Test func readsWhatTheSDKWritesAndWritesWhatTheServiceAnswers() throws {
        let sdk = """
            <entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><WindowsTemplateRegistrationDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><RegistrationId i:nil="true" /><Tags>a,b,a</Tags><ChannelUri>https://db5.notify.windows.com/?token=x</ChannelUri><BodyTemplate><![CDATA[<toast><text>$(m)</text></toast>]]></BodyTemplate><WnsHeaders><WnsHeader><Header>X-WNS-Type</Header><Value>wns/toast</Value></WnsHeader></WnsHeaders><TemplateName>t</TemplateName></WindowsTemplateRegistrationDescription></content></entry>
            """
        let description = try RegistrationXML.parse(Data(sdk.utf8))
        #expect(description.platform == .windows && description.tags == ["a", "b"])
        #expect(description.template == .init(body: "<toast><text>$(m)</text></toast>", name: "t", headers: [.init("X-WNS-Type", "wns/toast")]))
        var registration = HubRegistration(id: "r-1", platform: .windows, handle: description.handle, tags: description.tags, template: description.template)
        registration.etag = 3
        let written = RegistrationXML.descriptionXML(registration)
        #expect(
            written
                == #"<WindowsTemplateRegistrationDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><ETag>3</ETag><ExpirationTime>9999-12-31T23:59:59.9999999Z</ExpirationTime><RegistrationId>r-1</RegistrationId><Tags>a,b</Tags><ChannelUri>https://db5.notify.windows.com/?token=x</ChannelUri><BodyTemplate><![CDATA[<toast><text>$(m)</text></toast>]]></BodyTemplate><WnsHeaders><WnsHeader><Header>X-WNS-Type</Header><Value>wns/toast</Value></WnsHeader></WnsHeaders><TemplateName>t</TemplateName></WindowsTemplateRegistrationDescription>"#
        )
        // Each platform and template round-trips through the request writer and the reader; a
        // browser's with its keys.
        let browser = WebPushKeys.generate()
        let keys = try #require(BrowserKeys(p256dh: browser.p256dh, auth: browser.auth))
        for platform in HubPlatform.allCases {
            for template in [nil, HubRegistration.Template(body: #"{"x":"$(y)"} ]]> end"#, name: "n", headers: platform == .windows ? [.init("X-WNS-Type", "wns/raw")] : [])] {
                let original = RegistrationXML.Description(
                    platform: platform, handle: platform == .browser ? "https://fcm.googleapis.com/fcm/send/h?a=1&b='2'" : "h<&>\"", tags: ["t1", "a:b@c#d.e-f_g"], pushVariables: #"{"v":"1"}"#,
                    template: template, elementName: RegistrationXML.elementName(platform, template: template != nil),
                    browserKeys: platform == .browser ? keys : nil
                )
                let read = try RegistrationXML.parse(Data(RegistrationXML.requestEntry(original).utf8))
                #expect(read.platform == platform && read.handle == original.handle && read.tags == original.tags && read.template?.body == template?.body)
                #expect(read.browserKeys == original.browserKeys)
                // The hub's own tags are never read from a registration.
                var reserved = original
                reserved.tags.append("$InstallationId:{i}")
                #expect(throws: RegistrationXML.ParseError(description: TagExpression.reservedTagMessage)) {
                    try RegistrationXML.parse(Data(RegistrationXML.requestEntry(reserved).utf8))
                }
            }
        }
    }

    @Test func arbitraryBytesAreAnErrorNeverACrash() async {
        await propertyCheck(count: 300, input: Gen.uint64()) { seed in
            var rng = SplitMix64(seed: seed)
            let pieces = ["<entry>", "<content>", "<AppleRegistrationDescription>", "<DeviceToken>", "</DeviceToken>", "<![CDATA[", "]]>", "&amp;", "&#0;", "<", ">", "\u{0}", "é", "x", "<Tags>", "</Tags>", "<!--", "-->"]
            let text = (0..<Int(rng.next() % 40)).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined()
            _ = try? RegistrationXML.parse(Data(text.utf8))
        }
    }

    // MARK: Templates

    @Test func expandsTheDocumentedExpressionLanguage() throws {
        let properties = try TemplateExpansion.properties(Data(#"{"Title":"This is the title line","badge":"40","name":"Ann","url":"a b&c","text":"say \"hi\"\n"}"#.utf8))
        func json(_ template: String) -> String { TemplateExpansion.expand(template, properties: properties) }
        #expect(json(#"{"t":".(title, 20)"}"#) == #"{"t":"This is the title..."}"#)
        #expect(json(#"{"t":"$(TITLE, 4)"}"#) == #"{"t":"This"}"#, "names are not case-sensitive")
        #expect(json(##"{"aps":{"badge":"#(badge)","alert":"#(name)"}}"##) == #"{"aps":{"badge":40,"alert":"Ann"}}"#)
        #expect(json(#"{"u":"%(url)","m":"$(missing)"}"#) == #"{"u":"a%20b%26c","m":""}"#)
        #expect(json(#"{"g":"{'Hi, ' + $(name) + '!'}"}"#) == #"{"g":"Hi, Ann!"}"#)
        #expect(json(#"{"q":"$(text)"}"#) == #"{"q":"say \"hi\"\n"}"#, "values are escaped for JSON")
        #expect(json(#"{"$(name)":"plain text $(name)"}"#) == #"{"$(name)":"plain text $(name)"}"#, "keys and partial values stay")
        #expect(TemplateExpansion.expand(#"<toast><text id="1">$(text)</text><img src="%(url)"/></toast>"#, properties: properties)
            == #"<toast><text id="1">say &quot;hi&quot;"# + "\n" + #"</text><img src="a%20b%26c"/></toast>"#)
        #expect(throws: TemplateExpansion.Failure.self) { try TemplateExpansion.properties(Data(#"{"n":1}"#.utf8)) }
        #expect(throws: TemplateExpansion.Failure.self) { try TemplateExpansion.properties(Data("[]".utf8)) }
    }

    // MARK: Store

    @Test func registrationsHaveETagsExpiryAndLimits() throws {
        var limits = HubStore.Limits()
        limits.maxRegistrations = 2
        let store = HubStore(limits: limits, registrationTTL: .seconds(60))
        let second: Int64 = 1_000_000_000
        let apple = RegistrationXML.Description(platform: .apple, handle: "AB", tags: ["a"], elementName: "AppleRegistrationDescription")
        let created = try store.createOrUpdate(id: "x", apple, ifMatch: nil, now: 0).get()
        #expect(created.etag == 1 && created.expiresAt == 60 * second)
        #expect(try store.createOrUpdate(id: "x", apple, ifMatch: .etag(1), now: second).get().etag == 2)
        #expect(store.createOrUpdate(id: "x", apple, ifMatch: .etag(1), now: second) == .failure(.preconditionFailed))
        #expect(store.createOrUpdate(id: "y", apple, ifMatch: .any, now: second) == .failure(.notFound))
        guard case .failure(.preconditionFailed) = store.delete(id: "x", ifMatch: .etag(9), now: second) else {
            Issue.record("a delete with a stale ETag went through")
            return
        }
        // An id this hub issued, never used, past the time to live: gone.
        let issued = store.newRegistrationID(now: 0)
        #expect(store.createOrUpdate(id: issued, apple, ifMatch: nil, now: 61 * second) == .failure(.gone))
        #expect((try? store.createOrUpdate(id: store.newRegistrationID(now: 0), apple, ifMatch: nil, now: 30 * second).get()) != nil)
        #expect(store.createOrUpdate(id: "z", apple, ifMatch: nil, now: 30 * second) == .failure(.quotaExceeded("the hub holds 2 registrations")))
        // Registrations expire 60 s after their last update.
        #expect(store.registration("x", now: 60 * second) != nil)
        #expect(store.registration("x", now: 61 * second) == nil)
        #expect(store.query(.handle("ab"), top: 10, continuation: nil, now: 61 * second).page.count == 1, "APNs tokens without regard to case")
        #expect(store.removeExpiredHandle("ab", platform: .apple) == 1)
        #expect(store.count == 0)
        let tooMany = RegistrationXML.Description(platform: .apple, handle: "AB", tags: (0..<61).map { "t\($0)" }, elementName: "AppleRegistrationDescription")
        guard case .failure(.invalid) = store.createOrUpdate(id: "w", tooMany, ifMatch: nil, now: 0) else {
            Issue.record("61 tags were accepted")
            return
        }
    }

    @Test func sendsSelectByPlatformKindAndExpression() throws {
        let store = HubStore()
        func put(_ id: String, _ platform: HubPlatform, _ tags: [String], template: Bool = false) throws {
            let description = RegistrationXML.Description(
                platform: platform, handle: "h-\(id)", tags: tags, template: template ? .init(body: "{}") : nil,
                elementName: RegistrationXML.elementName(platform, template: template)
            )
            _ = try store.createOrUpdate(id: id, description, ifMatch: nil, now: 0).get()
        }
        try put("1", .apple, ["a"])
        try put("2", .apple, [])
        try put("3", .fcmv1, ["a"])
        try put("4", .apple, ["a"], template: true)
        try put("5", .windows, ["b"], template: true)
        func ids(_ platform: HubPlatform?, _ text: String?) throws -> [String] {
            try store.targets(platform: platform, expression: text.map { try TagExpression.parse($0) }, now: 0).map(\.id)
        }
        #expect(try ids(.apple, "a") == ["1"])
        #expect(try ids(.apple, "!a") == ["2"], "a negation reaches untagged registrations")
        #expect(try ids(.apple, nil) == ["1", "2"])
        #expect(try ids(nil, "a || b") == ["4", "5"], "templates of every platform")
        #expect(try ids(.gcm, nil) == [])
    }
}
