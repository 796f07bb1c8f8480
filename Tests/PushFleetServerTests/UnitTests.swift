import Foundation
import HummingbirdCore
import JWTKit
import PushFleetCore
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

@testable import PushFleetBackend
@testable import PushFleetMockPush

@Suite("Units")
struct UnitTests {
    /// The claims the reference backend writes, as jwt-kit reads them.
    struct LoginClaims: JWTPayload {
        var sub: String
        var iat: Int64
        var exp: Int64
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    @Test("tokens are HS256 JWTs to any JWT library: jwt-kit with the key verifies the backend's, the backend verifies jwt-kit's; a foreign key fails both ways")
    func tokenSignerAgainstJWTKit() async throws {
        let secret = Data(repeating: 7, count: 32)
        let signer = TokenSigner(secret: secret, lifetime: .seconds(60))
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        let claims = try await keys.verify(try await signer.issue(user: "bob/ü", now: 1_000), as: LoginClaims.self)
        #expect(claims.sub == "bob/ü" && claims.iat == 1_000 && claims.exp == 1_060)
        let theirs = try await keys.sign(LoginClaims(sub: "ann", iat: 1_000, exp: 1_030))
        #expect(try await signer.verify(theirs, now: 1_029) == "ann")
        await #expect(throws: TokenSigner.VerifyError.expired) { try await signer.verify(theirs, now: 1_030) }
        let foreign = await JWTKeyCollection().add(hmac: HMACKey(from: Data(repeating: 8, count: 32)), digestAlgorithm: .sha256)
        let foreignToken = try await foreign.sign(LoginClaims(sub: "ann", iat: 0, exp: 9_999))
        await #expect(throws: TokenSigner.VerifyError.badSignature) { try await signer.verify(foreignToken, now: 1) }
        let ours = try await signer.issue(user: "bob", now: 1_000)
        await #expect(throws: (any Error).self) { try await foreign.verify(ours, as: LoginClaims.self) }
    }

    @Test("tokens: issued ones verify; tampered, foreign-key and expired ones do not")
    func tokenSigner() async throws {
        let signer = TokenSigner(secret: Data(repeating: 1, count: 32), lifetime: .seconds(60))
        let token = try await signer.issue(user: "bob", now: 1000)
        #expect(try await signer.verify(token, now: 1059) == "bob")
        await #expect(throws: TokenSigner.VerifyError.expired) { try await signer.verify(token, now: 1060) }
        let other = TokenSigner(secret: Data(repeating: 2, count: 32), lifetime: .seconds(60))
        await #expect(throws: TokenSigner.VerifyError.badSignature) { try await other.verify(token, now: 1000) }
        await #expect(throws: TokenSigner.VerifyError.malformed) { try await signer.verify("a.b", now: 1000) }
        var tampered = Array(token)
        tampered[tampered.count / 2] = tampered[tampered.count / 2] == "A" ? "B" : "A"
        await #expect(throws: (any Error).self) { try await signer.verify(String(tampered), now: 1000) }
        // Another algorithm named in the header is refused, whatever the signature.
        let parts = token.split(separator: ".")
        let none = Data(#"{"alg":"none","typ":"JWT"}"#.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
        await #expect(throws: (any Error).self) { try await signer.verify("\(none).\(parts[1]).", now: 1000) }
        await #expect(throws: (any Error).self) { try await signer.verify("\(none).\(parts[1]).\(parts[2])", now: 1000) }
    }

    @Test("credentials parsing")
    func credentials() throws {
        let basic = "Basic " + Data("bob:p:w".utf8).base64EncodedString()
        #expect(try Credentials(header: basic) == .basic(user: "bob", password: "p:w"))
        #expect(try Credentials(header: "bearer abc") == .bearer("abc"))
        #expect(throws: Credentials.ParseError.missing) { try Credentials(header: nil) }
        #expect(throws: Credentials.ParseError.malformedBasic) { try Credentials(header: "Basic ???") }
        #expect(throws: Credentials.ParseError.unsupportedScheme) { try Credentials(header: "Token x") }
        // Optional whitespace around the value and between scheme and value, as HTTP allows.
        #expect(try Credentials(header: " \tBearer \t abc \t") == .bearer("abc"))
        #expect(try Credentials(header: "BASIC\t" + Data("a:".utf8).base64EncodedString()) == .basic(user: "a", password: ""))
        #expect(throws: Credentials.ParseError.missing) { try Credentials(header: " \t ") }
        #expect(throws: Credentials.ParseError.unsupportedScheme) { try Credentials(header: "Bearer") }
        #expect(throws: Credentials.ParseError.unsupportedScheme) { try Credentials(header: "Bearer \t ") }
        #expect(throws: Credentials.ParseError.malformedBasic) { try Credentials(header: "Basic " + Data(":pw".utf8).base64EncodedString()) }
    }

    @Test("tag characters: the byte test is ASCII letters and digits and _@#.:-, as the character set it replaced")
    func tagBytes() {
        let allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)..<Unicode.Scalar(128)))
            .union(CharacterSet(charactersIn: "_@#.:-"))
        for byte in UInt8.min...UInt8.max {
            #expect(ReferenceBackend.isTagByte(byte) == (byte < 0x80 && allowed.contains(Unicode.Scalar(byte))), "byte \(byte)")
        }
        #expect(ReferenceBackend.userTag("bob&x=1") == "username:bob.26x.3D1")
        #expect(ReferenceBackend.userTag("a.é") == "username:a.2E.C3.A9")
    }

    @Test("the secure send's to_tag is read from the target's bytes as the router's URI reads it, for any query")
    func toTagAsURIReadsIt() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["to_tag", "to_ta", "=", "&", "bob", "%41", "%", "#", "+", "?", "é", "x=y", ""]
        var targets = ["/api/notifications/secure", "/api/notifications/secure?", "/api/notifications/secure?to_tag", "?to_tag=&to_tag=b"]
        for _ in 0..<5_000 {
            let count = Int.random(in: 0...7, using: &generator)
            targets.append("/api/notifications/secure?" + (0..<count).map { _ in pieces.randomElement(using: &generator)! }.joined())
        }
        for target in targets {
            #expect(ReferenceBackend.toTag(inTarget: target) == URI(target).queryParameters["to_tag"], "\(target)")
        }
    }

    @Test("base64url: every length round-trips as Foundation spells it; padding, other alphabets and stray bits are refused")
    func base64URL() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let data = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let encoded = Base64URL.encode(data)
            let foundation = data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(encoded == foundation)
            #expect(Base64URL.decode(encoded) == data)
        }
        // Standard base64 with padding, as a Basic credential: every length, and text beyond ASCII.
        for length in 0..<70 {
            let text = String((0..<length).map { _ in Character(Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &generator))) }) + (length % 7 == 0 ? "é漢" : "")
            #expect(Base64.encode(text) == Data(text.utf8).base64EncodedString())
        }
        #expect(Base64URL.decode("QQ==") == nil)
        #expect(Base64URL.decode("a+b/") == nil)
        #expect(Base64URL.decode("QQ") == Data("A".utf8))
        #expect(Base64URL.decode("QR") == nil, "stray bits after the last byte")
        #expect(Base64URL.decode("QUJDR") == nil, "a length no encoding has")
    }

    @Test("fault draws: seeded, within bounds, with the asked-for shares")
    func faultInjector() {
        let settings = FaultSettings(drop: 0.2, throttle: 0.1, latency: .uniform(minMs: 5, maxMs: 15), seed: 7)
        let a = FaultInjector(settings: settings)
        let b = FaultInjector(settings: settings)
        var drops = 0
        var throttles = 0
        for index in 0..<10_000 {
            let x = a.decide(token: "t\(index)", at: 0)
            let y = b.decide(token: "t\(index)", at: 0)
            #expect(x.dropped == y.dropped && x.delay == y.delay)
            #expect(x.delay >= .milliseconds(5) && x.delay <= .milliseconds(15))
            if x.dropped { drops += 1 }
            if x.throttled { throttles += 1 }
        }
        #expect((1800...2200).contains(drops))
        #expect((850...1150).contains(throttles))

        let normal = FaultInjector(settings: FaultSettings(latency: .normal(meanMs: 50, stddevMs: 10), seed: 3))
        let samples = (0..<5000).map { _ in normal.decide(token: "x", at: 0).delay.seconds * 1000 }
        let mean = samples.reduce(0, +) / Double(samples.count)
        let sd = (samples.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(samples.count)).squareRoot()
        #expect(abs(mean - 50) < 1 && abs(sd - 10) < 1)

        let ratio = FaultInjector(settings: FaultSettings(unregisteredRatio: 0.3, seed: 9))
        let unregistered = (0..<10_000).filter { ratio.decide(token: "token-\($0)", at: 0).unregistered }.count
        #expect((2700...3300).contains(unregistered))
        // A token's fate is stable across pushes.
        #expect(ratio.decide(token: "token-1", at: 0).unregistered == ratio.decide(token: "token-1", at: 0).unregistered)
        #expect(FaultSettings(drop: 1.5, latency: .fixed(ms: -1)).problems().count == 2)
    }

    @Test("durations and listen addresses parse as documented")
    func parsing() throws {
        #expect(try DurationText.parse("250ms") == .milliseconds(250))
        #expect(try DurationText.parse("1.5s") == .milliseconds(1500))
        #expect(try DurationText.parse("2m") == .seconds(120))
        #expect(try DurationText.parse("24h") == .seconds(86_400))
        #expect(try DurationText.parse("30") == .seconds(30))
        #expect(throws: DurationText.ParseError.self) { try DurationText.parse("fast") }
        #expect(throws: DurationText.ParseError.self) { try DurationText.parse("-1s") }
        #expect(DurationText.format(.milliseconds(250)) == "250ms")
        #expect(DurationText.format(.seconds(120)) == "2m")
        #expect(try ListenAddress(parsing: "[::1]:8080") == ListenAddress(host: "::1", port: 8080))
        #expect(try ListenAddress(parsing: ":0") == ListenAddress(host: "127.0.0.1", port: 0))
        #expect(try ListenAddress(parsing: "[::1]:80").httpURL == "http://[::1]:80")
        #expect(throws: ListenAddress.ParseError.self) { try ListenAddress(parsing: "localhost") }
        #expect(throws: ListenAddress.ParseError.self) { try ListenAddress(parsing: "host:99999") }
    }

    @Test("native payloads are valid JSON and XML whatever the message holds")
    func nativePayloads() throws {
        let message = #"quote " backslash \ newline \#n <tag> & 'apos'"#
        let apns = try #require(NativeNotification.alert(platform: .apns, from: "a", message: message))
        let data = try JSONEncoder().encode(apns.body)
        let decoded = try JSONSerialization.jsonObject(with: data) as? [String: [String: String]]
        #expect(decoded?["aps"]?["alert"] == "From a: " + message)
        let wns = try #require(NativeNotification.alert(platform: .wns, from: "a", message: message))
        #expect(wns.text?.contains("&lt;tag&gt; &amp; &apos;apos&apos;") == true)
        #expect(NativeNotification.alert(platform: .mpns, from: "a", message: "m") == nil)
        #expect(throws: (any Error).self) { try PushSender.channelURL("http://evil.example/wns/x", base: "http://127.0.0.1:1") }
        #expect(try PushSender.channelURL("http://127.0.0.1:1/wns/x", base: "http://127.0.0.1:1") == "http://127.0.0.1:1/wns/x")
        // WNS's own form, as the push service mints channel URIs over TLS: delivered to its /wns/{channel}.
        let base = "http://127.0.0.1:1"
        #expect(try PushSender.channelURL("https://wns2-pf.notify.windows.com/w/?token=AwY%2Bx", base: base) == "\(base)/wns/AwY%2Bx")
        #expect(try PushSender.channelURL("https://127.0.0.1:4443/?token=c1", base: base) == "\(base)/wns/c1")
        for refused in [
            "https://evil.example/w/?token=c1", "https://notify.windows.com.evil.example/w/?token=c1",
            "https://wns2-pf.notify.windows.com/other?token=c1", "https://wns2-pf.notify.windows.com/w/?token=",
            "https://wns2-pf.notify.windows.com/w/?token=a&to=http://evil", "https://u:p@wns2-pf.notify.windows.com/w/?token=c1",
        ] {
            #expect(throws: (any Error).self, "\(refused)") { try PushSender.channelURL(refused, base: base) }
        }
    }

    @Test("provider bodies written in one pass are byte for byte JSONEncoder's with sorted keys, and decode to the same value")
    func providerBodyText() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var rng = SplitMix64(seed: 0xB0D1)
        let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{1F}", "é", "漢", "🚀", "\u{7F}", "{", ":"]
        func text() -> String { (0..<Int(rng.next() % 10)).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined() }
        func value(depth: Int) -> JSONValue {
            switch rng.next() % (depth < 3 ? 3 : 2) {
            case 0: return .string(text())
            case 1: return .int(Int(bitPattern: UInt(rng.next())) >> Int(rng.next() % 64))
            default: return .object(Dictionary((0..<Int(rng.next() % 5)).map { _ in (text(), value(depth: depth + 1)) }) { first, _ in first })
            }
        }
        for _ in 0..<1_000 {
            guard case .object(let members) = value(depth: 2) else { continue }
            let written = JSONValue.text(members)
            #expect(written == String(decoding: try encoder.encode(members), as: UTF8.self))
            #expect(try JSONDecoder().decode([String: JSONValue].self, from: Data(written.utf8)) == members)
        }
        let secure = try #require(NativeNotification.secure(platform: .apns, id: "0A1B"))
        #expect(String(decoding: secure.bodyJSON, as: UTF8.self) == #"{"aps":{"content-available":1},"secureId":"0A1B"}"#)
        // The secure push's body made at once is the members' encoding, whatever the id.
        for id in ["0A1B", UUIDText.unguessable(upper: false), "quote\"back\\slash\u{1}é"] {
            let made = try #require(NativeNotification.secure(platform: .apns, id: id))
            #expect(made.bodyText == JSONValue.text(try #require(made.body)), "\(id)")
            #expect(made.encodedBody != nil, "the secure push keeps the body it encoded at once")
        }
        var changed = try #require(NativeNotification.secure(platform: .apns, id: "0A1B"))
        changed.body?["secureId"] = .string("2C3D")
        #expect(changed.bodyText == #"{"aps":{"content-available":1},"secureId":"2C3D"}"#, "a body changed is not the one encoded before")
    }

    @Test("stored notifications expire oldest first: a sweep drops exactly the expired ones, and each store takes a few expired ones with it")
    func notificationExpiryQueue() {
        let second: Int64 = 1_000_000_000
        let store = NotificationStore(ttl: .seconds(10))
        var ids: [String] = []
        for index in 0..<5_000 {
            ids.append(store.create(sender: "a", recipient: "b", content: .secure(payload: "p"), now: Int64(index) * second / 1_000)!.id)
        }
        // Created from 0 to 4.999 s: at 12.5 s those stored before 2.5 s have expired.
        _ = store.read(id: ids[10], reader: "b", now: 0)
        store.remove(id: ids[20])
        #expect(store.sweep(now: 12 * second + second / 2) == 2_501)
        #expect(store.count == 2_499)
        #expect(store.read(id: ids[2_500], reader: "b", now: 12 * second + second / 2) == nil)
        #expect(store.read(id: ids[2_501], reader: "b", now: 12 * second + second / 2)?.id == ids[2_501])
        // Stores made after everything expired each take up to four expired ones with them.
        for _ in 0..<100 { _ = store.create(sender: "a", recipient: "b", content: .secure(payload: "p"), now: 60 * second) }
        #expect(store.count == 2_499 - 400 + 100)
        #expect(store.sweep(now: 60 * second) == 2_099)
        #expect(store.count == 100)
    }
}
