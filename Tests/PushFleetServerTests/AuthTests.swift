import Foundation
import NIOHTTP1
@testable import PushFleetBackend
import PushFleetEmbedded
import PushFleetTestSupport
import PushFleetWire
import Testing

@Suite("Authentication")
struct AuthTests {
    static let badHeaders: [(String, String)] = [
        ("Basic !!!notbase64", "bad base64"),
        ("Basic " + Data("nocolon".utf8).base64EncodedString(), "no colon"),
        ("Basic " + Data(":password".utf8).base64EncodedString(), "empty user"),
        ("Basic", "no credentials"),
        ("Digest abc", "unknown scheme"),
        ("Bearer", "empty token"),
        ("Bearer not.a.token", "malformed token"),
        ("Basic " + Data("alice:bob".utf8).base64EncodedString(), "wrong password"),
    ]

    @Test("missing or malformed credentials get 401 with a challenge on every call")
    func unauthorized() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let calls: [(HTTPMethod, String)] = [
                (.POST, "/api/login"), (.POST, "/api/register"), (.PUT, "/api/register/x"), (.DELETE, "/api/register/x"),
                (.POST, "/api/notifications?pns=apns&to_tag=bob"), (.POST, "/api/notifications/secure"),
                (.POST, "/api/notifications/rich"), (.GET, "/api/notifications/x"),
            ]
            for (method, path) in calls {
                let missing = try await TestHTTP.request(method, system.backend + path, body: Data("\"x\"".utf8))
                #expect(missing.status == 401, "\(method) \(path) without Authorization")
                #expect(missing.headers.first(name: "www-authenticate")?.contains("Basic") == true)
            }
            for (header, why) in Self.badHeaders {
                let response = try await TestHTTP.request(.POST, system.backend + "/api/register", auth: .raw(header))
                #expect(response.status == 401, "\(why)")
            }
            #expect(try await TestHTTP.request(.GET, system.backend + "/health").status == 200)
        }
    }

    @Test("forged and expired tokens are refused")
    func tokens() async throws {
        var configuration = EmbeddedSystem.Configuration()
        let secret = Data("a test secret of at least 32 bytes".utf8)
        configuration.backend.tokenSecret = secret
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let token = try await TestHTTP.request(.POST, "\(system.backend)/api/login", auth: .user("bob")).json(LoginResponse.self).token
            #expect(try await TestHTTP.request(.POST, "\(system.backend)/api/register", auth: .bearer(token)).status == 200)

            // Claim to be alice with bob's signature.
            var parts = token.split(separator: ".").map(String.init)
            let claims = try JSONSerialization.jsonObject(with: Data(base64URL: parts[1])) as! [String: Any]
            var forged = claims
            forged["sub"] = "alice"
            parts[1] = try JSONSerialization.data(withJSONObject: forged).base64URL
            let forgery = try await TestHTTP.request(.POST, "\(system.backend)/api/register", auth: .bearer(parts.joined(separator: ".")))
            #expect(forgery.status == 401)

            // alg "none" with no signature.
            let none = Data(#"{"alg":"none","typ":"JWT"}"#.utf8).base64URL + "." + parts[1] + "."
            #expect(try await TestHTTP.request(.POST, "\(system.backend)/api/register", auth: .bearer(none)).status == 401)

            // A genuine signature whose lifetime ended an hour ago.
            let old = try await TokenSigner(secret: secret, lifetime: .seconds(60)).issue(user: "bob", now: Int64(Date().timeIntervalSince1970) - 3600)
            let expired = try await TestHTTP.request(.POST, "\(system.backend)/api/register", auth: .bearer(old))
            #expect(expired.status == 401)
            #expect(expired.text.contains("expired"))
        }
    }

    @Test("a users file replaces the demo rule")
    func usersFile() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.users = try UserDirectory(
            fileContents: "# test users\n\(UserDirectory.line(user: "alice", password: "s3cret"))\n\n"
        )
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let url = "\(system.backend)/api/login"
            #expect(try await TestHTTP.request(.POST, url, auth: .basic("alice", "s3cret")).status == 200)
            #expect(try await TestHTTP.request(.POST, url, auth: .basic("alice", "alice")).status == 401)
            #expect(try await TestHTTP.request(.POST, url, auth: .basic("bob", "bob")).status == 401)
        }
        #expect(throws: UserDirectory.FileError.self) { try UserDirectory(fileContents: "alice:plain:pw") }
        #expect(throws: UserDirectory.FileError.self) { try UserDirectory(fileContents: "alice:sha256:salt:zz") }
        // A multi-byte character among the digits (a fuzz finding: it crashed the parser), a sign.
        #expect(throws: UserDirectory.FileError.self) { try UserDirectory(fileContents: "bob:sha256:00:" + String(repeating: "0", count: 62) + "Х") }
        #expect(throws: UserDirectory.FileError.self) { try UserDirectory(fileContents: "bob:sha256:00:+f" + String(repeating: "0", count: 62)) }
    }
}

extension Data {
    init(base64URL text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        self = Data(base64Encoded: base64) ?? Data()
    }

    var base64URL: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
