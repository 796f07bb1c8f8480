import Crypto
import Foundation
import PushFleetCore
import PushFleetServerSupport
import PushFleetTestSupport
import Testing

@testable import PushFleetMockPush

/// The providers' authentication rules as pure functions and state machines, with time given:
/// no sockets, no clock.
@Suite("Provider auth rules")
struct ProviderAuthRulesTests {
    static let now: Int64 = 1_800_000_000

    static func token(issuedAt: Int64 = now, keyID: String = "KEY0000001", team: String = "TEAM000001", algorithm: String = "ES256")
        -> String
    {
        TestCredentials.apnsToken(issuedAt: issuedAt, keyID: keyID, teamID: team, algorithm: algorithm)
    }

    @Test("the Bearer scheme in any case, then its credentials; anything else, or a scheme whose space a mark joins, is none")
    func bearerScheme() {
        #expect(ProviderAuthority.bearer("Bearer a.b.c") == "a.b.c")
        #expect(ProviderAuthority.bearer("BEARER x") == "x")
        #expect(ProviderAuthority.bearer("bearer é") == "é")
        for hostile in [nil, "", "Bearer", "Bearer ", "Basic abc", "Bearer\tx", "Bearer\u{0}x", "Bearex x", "B\u{e9}arer x", "bearer \u{301}x", "Bear\u{0}r x"] {
            #expect(ProviderAuthority.bearer(hostile) == nil, "\(String(describing: hostile).debugDescription)")
        }
    }

    @Test("an APNs provider token: ES256, kid, iss and iat; an hour old is expired; ahead of the clock or malformed is invalid")
    func apnsTokenClaims() throws {
        let valid = try APNsProviderToken.inspect(Self.token(), now: Self.now).get()
        #expect(valid.identity == .init(keyID: "KEY0000001", teamID: "TEAM000001", issuedAt: Self.now))
        #expect((try? APNsProviderToken.inspect(Self.token(issuedAt: Self.now - 3600), now: Self.now).get()) != nil)
        #expect(APNsProviderToken.inspect(Self.token(issuedAt: Self.now - 3601), now: Self.now) == .failure(.expired))
        #expect((try? APNsProviderToken.inspect(Self.token(issuedAt: Self.now + 300), now: Self.now).get()) != nil)
        #expect(APNsProviderToken.inspect(Self.token(issuedAt: Self.now + 301), now: Self.now) == .failure(.invalid))
        #expect(APNsProviderToken.inspect(Self.token(algorithm: "HS256"), now: Self.now) == .failure(.invalid))
        #expect(APNsProviderToken.inspect(Self.token(keyID: ""), now: Self.now) == .failure(.invalid))
        let noIssuedAt = TestCredentials.jwt(header: ["alg": "ES256", "kid": "K"], claims: ["iss": "T"]) { _ in Data(count: 64) }
        #expect(APNsProviderToken.inspect(noIssuedAt, now: Self.now) == .failure(.invalid))
        let shortSignature = TestCredentials.jwt(header: ["alg": "ES256", "kid": "K"], claims: ["iss": "T", "iat": Self.now]) { _ in Data(count: 8) }
        #expect(APNsProviderToken.inspect(shortSignature, now: Self.now) == .failure(.invalid))
        // Times far outside any clock are refused where they enter, never subtracted.
        for extreme in [Int64.min, Int64.max, -EpochSeconds.limit - 1] {
            #expect(APNsProviderToken.inspect(Self.token(issuedAt: extreme), now: Self.now) == .failure(.invalid))
        }
        let huge = TestCredentials.jwt(header: ["alg": "ES256", "kid": "K"], claims: ["iss": "T", "iat": 1e300]) { _ in Data(count: 64) }
        #expect(APNsProviderToken.inspect(huge, now: Self.now) == .failure(.invalid))
        for garbage in ["", "abc", "a.b.c", "....", String(repeating: "x.", count: 3000)] {
            #expect(APNsProviderToken.inspect(garbage, now: Self.now) == .failure(.invalid))
        }
    }

    @Test("one connection, one token at a time: a change less than 20 minutes after the current token's issue is too many updates")
    func apnsTokenSession() throws {
        var session = APNsTokenSession()
        let first = try APNsProviderToken.inspect(Self.token(), now: Self.now).get()
        #expect(session.step(for: first.text, now: Self.now) == .verify)
        #expect(session.adopt(first) == .adopted)
        // HTTP/2 streams that presented the same new token at once each verify and adopt it: no update.
        #expect(session.adopt(first) == .adopted)
        #expect(session.step(for: first.text, now: Self.now + 600) == .accepted(first.identity))
        #expect(session.step(for: first.text, now: Self.now + 3601) == .expired)

        let soon = try APNsProviderToken.inspect(Self.token(issuedAt: Self.now + 1199), now: Self.now + 1199).get()
        #expect(session.step(for: soon.text, now: Self.now + 1199) == .verify)
        #expect(session.adopt(soon) == .tooManyUpdates)
        // The refused token did not replace the current one.
        #expect(session.step(for: first.text, now: Self.now + 1199) == .accepted(first.identity))

        let later = try APNsProviderToken.inspect(Self.token(issuedAt: Self.now + 1200), now: Self.now + 1200).get()
        #expect(session.adopt(later) == .adopted)
        #expect(session.step(for: later.text, now: Self.now + 1300) == .accepted(later.identity))
        // Going back to an older token is a change too.
        #expect(session.adopt(first) == .tooManyUpdates)

        let otherTeam = try APNsProviderToken.inspect(Self.token(issuedAt: Self.now + 5000, team: "OTHERTEAM1"), now: Self.now + 5000).get()
        #expect(session.adopt(otherTeam) == .otherTeam)
    }

    @Test("topics: any when none are configured; a bundle id alone or with a push type's suffix")
    func apnsTopics() {
        #expect(APNsTopics.isAllowed("anything", bundles: []))
        #expect(APNsTopics.isAllowed("com.example.app", bundles: ["com.example.app"]))
        #expect(APNsTopics.isAllowed("com.example.app.voip", bundles: ["com.example.app"]))
        #expect(APNsTopics.isAllowed("com.example.app.push-type.liveactivity", bundles: ["com.example.app"]))
        #expect(!APNsTopics.isAllowed("com.example.other", bundles: ["com.example.app"]))
        #expect(!APNsTopics.isAllowed("com.example.app.evil", bundles: ["com.example.app"]))
        #expect(APNsTopics.bundles(ofCertificate: [0x30, 0x03, 0x02, 0x01, 0x01]) == nil)
    }

    static func form(_ assertion: String, grant: String = GoogleOAuth.grantType) -> [String: String] {
        ["grant_type": grant, "assertion": assertion]
    }

    @Test("Google's JWT-bearer grant: RS256 assertion for the token endpoint, at most an hour, with scopes")
    func googleAssertion() async throws {
        let good = try GoogleOAuth.check(form: Self.form(try await TestCredentials.googleAssertion(issuedAt: Self.now)), now: Self.now).get()
        #expect(good.account == "sender@demo.iam.gserviceaccount.com")
        #expect(good.scopes == ["https://www.googleapis.com/auth/firebase.messaging"])
        #expect(GoogleOAuth.project(ofAccount: good.account) == "demo")
        #expect(GoogleOAuth.project(ofAccount: "someone@example.com") == nil)

        func failure(_ form: [String: String]) -> String? {
            if case .failure(let failure) = GoogleOAuth.check(form: form, now: Self.now) { return failure.error }
            return nil
        }
        #expect(failure(Self.form("x", grant: "password")) == "unsupported_grant_type")
        #expect(failure(["grant_type": GoogleOAuth.grantType]) == "invalid_request")
        #expect(failure(Self.form("not-a-jwt")) == "invalid_grant")
        #expect(failure(Self.form(try await TestCredentials.googleAssertion(audience: "https://example.com/token", issuedAt: Self.now))) == "invalid_grant")
        #expect(failure(Self.form(try await TestCredentials.googleAssertion(issuedAt: Self.now, lifetime: 3601))) == "invalid_grant")
        #expect(failure(Self.form(try await TestCredentials.googleAssertion(issuedAt: Self.now - 4000))) == "invalid_grant")
        #expect(failure(Self.form(try await TestCredentials.googleAssertion(issuedAt: Self.now + 1000))) == "invalid_grant")
        #expect(failure(Self.form(try await TestCredentials.googleAssertion(scope: "", issuedAt: Self.now))) == "invalid_scope")
        #expect(failure(Self.form(try await TestCredentials.googleAssertion(account: "no-at-sign", issuedAt: Self.now))) == "invalid_grant")
        #expect(failure(Self.form(try await TestCredentials.googleAssertion(issuedAt: Int64.min + 10, lifetime: Int64.max))) == "invalid_grant")
        let es256 = TestCredentials.jwt(header: ["alg": "ES256"], claims: ["iss": "a@b"]) { _ in Data(count: 64) }
        #expect(failure(Self.form(es256)) == "invalid_grant")

        #expect(GoogleOAuth.Grant(account: "a", scopes: ["https://www.googleapis.com/auth/cloud-platform"], project: nil).maySendMessages)
        #expect(!GoogleOAuth.Grant(account: "a", scopes: ["https://www.googleapis.com/auth/userinfo.email"], project: nil).maySendMessages)
    }

    @Test("WNS client credentials: grant, scope, and the configured clients")
    func wnsClientCredentials() throws {
        let form = ["grant_type": "client_credentials", "client_id": "ms-app://s-1", "client_secret": "s", "scope": "notify.windows.com"]
        #expect(WNSOAuth.check(form: form, clients: []) == .success(.init(clientID: "ms-app://s-1")))
        #expect(WNSOAuth.check(form: form, clients: [.init(id: "ms-app://s-1", secret: "s")]) == .success(.init(clientID: "ms-app://s-1")))
        func error(_ form: [String: String], _ clients: [ProviderAuthConfiguration.WNSClient] = []) -> String? {
            if case .failure(let failure) = WNSOAuth.check(form: form, clients: clients) { return failure.error }
            return nil
        }
        #expect(error(form, [.init(id: "ms-app://s-1", secret: "other")]) == "invalid_client")
        #expect(error(form, [.init(id: "ms-app://s-2", secret: "s")]) == "invalid_client")
        #expect(error(form.merging(["scope": "x"]) { $1 }) == "invalid_scope")
        #expect(error(form.merging(["grant_type": "password"]) { $1 }) == "unsupported_grant_type")
        #expect(error(form.filter { $0.key != "client_secret" }) == "invalid_request")
        #expect((try? ProviderAuthConfiguration.WNSClient.parse("ms-app://s-1=abc")) == .init(id: "ms-app://s-1", secret: "abc"))
        #expect(throws: ProviderAuthError.self) { try ProviderAuthConfiguration.WNSClient.parse("no-secret") }
    }

    @Test("minted access tokens: valid until their lifetime, then expired; a full store refuses rather than grows")
    func accessTokenStore() throws {
        let store = AccessTokenStore<String>(prefix: "t.", capacity: 2)
        let first = try #require(store.mint("a", lifetime: 10, now: 100))
        #expect(first.hasPrefix("t."))
        guard case .valid("a") = store.lookup(first, now: 109) else { Issue.record("not valid"); return }
        guard case .expired = store.lookup(first, now: 110) else { Issue.record("not expired"); return }
        guard case .unknown = store.lookup("t.other", now: 100) else { Issue.record("not unknown"); return }
        #expect(store.mint("b", lifetime: 100, now: 100) != nil)
        // Full: the expired one goes first; with none expired, minting is refused.
        #expect(store.mint("c", lifetime: 100, now: 150) != nil)
        #expect(store.mint("d", lifetime: 100, now: 150) == nil)
        #expect(store.count == 2)
    }

    @Test("form bodies decode + and %XX; repeated keys and broken escapes are refused")
    func formBodies() {
        #expect(FormBody.parse("a=1&b=x+y&c=%3A%2F") == ["a": "1", "b": "x y", "c": ":/"])
        #expect(FormBody.parse("") == [:])
        #expect(FormBody.parse("a=1&a=2") == nil)
        #expect(FormBody.parse("a=%zz") == nil)
    }

    @Test("the first bytes tell HTTP/2 from HTTP/1.1")
    func httpVersionSniff() {
        let preface = HTTPVersionSniff.http2Preface
        #expect(HTTPVersionSniff.classify([UInt8]()) == .needMore)
        #expect(HTTPVersionSniff.classify(preface.prefix(10)) == .needMore)
        #expect(HTTPVersionSniff.classify(preface) == .http2)
        #expect(HTTPVersionSniff.classify(preface + [0, 0, 0]) == .http2)
        #expect(HTTPVersionSniff.classify(Array("POST /3/device/x HTTP/1.1\r\n".utf8)) == .http1)
        #expect(HTTPVersionSniff.classify(Array("PRI * HTTP/1.1".utf8)) == .http1)
        #expect(HTTPVersionSniff.classify([0x16, 0x03, 0x01]) == .http1)
    }

    @Test("TLS names: DNS names with an optional leading wildcard, or IP addresses")
    func tlsNames() {
        #expect(TLSNames.problems(TLSNames.defaults).isEmpty)
        #expect(TLSNames.problems(["127.0.0.1", "::1", "localhost", "*.notify.windows.com"]).isEmpty)
        #expect(TLSNames.problems([]).count == 1)
        #expect(TLSNames.problems(["a..b"]).count == 1)
        #expect(TLSNames.problems(["-bad.example"]).count == 1)
        #expect(TLSNames.problems(["a.*.example"]).count == 1)
        #expect(TLSNames.problems(["has space"]).count == 1)
        #expect(TLSNames.problems(Array(repeating: "a.example", count: 101)).count == 1)
        #expect(TLSNames.problems([String(repeating: "a", count: 64) + ".example"]).count == 1)
        #expect(TLSNames.ipAddressBytes("10.0.0.1") == [10, 0, 0, 1])
        #expect(TLSNames.ipAddressBytes("::1")?.count == 16)
    }
}
