import AsyncHTTPClient
import Crypto
import CryptoExtras
import Foundation
import NIOHTTP1
import NIOSSL
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import SwiftASN1
import Testing
import X509

/// The push service's TLS listener over real sockets: the same router as the cleartext port on
/// HTTP/2 and HTTP/1.1, tools no one here wrote (curl, openssl), and input no client should send.
@Suite("Mock push service over TLS")
struct TLSTests {
    static let apnsHeaders = [("authorization", TestCredentials.apnsAuthorization), ("apns-topic", "com.example.app")]

    @Test("HTTP/2 and HTTP/1.1 on one port serve every endpoint: APNs, OAuth, FCM, WNS, admin and the device gateway")
    func sameRouterOnBothVersions() async throws {
        try await TLSTestSystem.run { tls in
            // By name: TLS clients send no SNI for an address.
            let device = try await TestDevice.connect(pushService: "https://localhost:\(tls.port)", platform: .apns, tls: try tls.clientTLS())
            let token = device.address!.token
            for http1Only in [false, true] {
                try await tls.withClient(http1Only: http1Only) { client, base in
                    let health = try await client.send(.GET, "\(base)/health")
                    #expect(health.status == 200 && health.version.major == (http1Only ? 1 : 2))
                    let push = try await client.send(
                        .POST, "\(base)/3/device/\(token)", headers: Self.apnsHeaders, body: Data(#"{"aps":{"alert":"tls \#(http1Only)"}}"#.utf8)
                    )
                    #expect(push.status == 200, "\(push.text)")
                    let stats = try await client.send(.GET, "\(base)/admin/stats", headers: [("authorization", "Bearer \(tls.system.adminToken!)")])
                    #expect(stats.status == 200)
                }
            }
            let pushes = try await device.waitForPushes(2)
            #expect(pushes.map(\.body).contains { $0.contains("tls false") } && pushes.map(\.body).contains { $0.contains("tls true") })

            // FCM: the service-account grant at Google's token path, then the v1 send.
            let fcmDevice = try await TestDevice.connect(pushService: tls.system.pushService, platform: .fcm)
            try await tls.withClient(host: "fcm.googleapis.com") { client, base in
                let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(try await TestCredentials.googleAssertion())"
                let granted = try await client.send(
                    .POST, "\(base)/token", headers: [("content-type", "application/x-www-form-urlencoded")], body: Data(form.utf8)
                )
                #expect(granted.status == 200 && granted.version.major == 2)
                let answer = try JSONDecoder().decode([String: TestCredentials.TokenValue].self, from: Data(granted.text.utf8))
                #expect(answer["token_type"]?.text == "Bearer" && answer["expires_in"]?.number == 3599)
                let access = try #require(answer["access_token"]?.text)
                let sent = try await client.send(
                    .POST, "\(base)/v1/projects/demo/messages:send", headers: [("authorization", "Bearer \(access)")],
                    body: Data(#"{"message":{"token":"\#(fcmDevice.address!.token)","data":{"message":"over tls"}}}"#.utf8)
                )
                #expect(sent.status == 200 && sent.text.contains("projects/demo/messages/"), "\(sent.text)")
                let otherProject = try await client.send(
                    .POST, "\(base)/v1/projects/someone-else/messages:send", headers: [("authorization", "Bearer \(access)")],
                    body: Data(#"{"message":{"token":"abc"}}"#.utf8)
                )
                #expect(otherProject.status == 403 && otherProject.text.contains("PERMISSION_DENIED"))
            }
            #expect(try await fcmDevice.waitForPushes(1)[0].body.contains("over tls"))

            // WNS: a channel URI minted on a notify host leads back here; a push to it arrives.
            try await tls.withClient(host: "db5.notify.windows.com") { client, base in
                let minted = try await client.send(.POST, "\(base)/wns/channels")
                let channel = try JSONDecoder().decode([String: TestCredentials.TokenValue].self, from: Data(minted.text.utf8))
                let uri = try #require(channel["channelUri"]?.text)
                #expect(uri.hasPrefix("\(base)/w/?token="))
                let wnsDevice = try await TestDevice.connect(pushService: tls.system.pushService, platform: .wns, token: channel["token"]?.text)
                let access = try await TestCredentials.wnsAuthorization(pushService: tls.system.pushService)
                let sent = try await client.send(
                    .POST, uri, headers: [("authorization", access), ("X-WNS-Type", "wns/raw")], body: Data("raw over tls".utf8)
                )
                #expect(sent.status == 200 && sent.headers.first(name: "X-WNS-Status") == "received")
                #expect(try await wnsDevice.waitForPushes(1)[0].body == "raw over tls")
            }
        }
    }

    @Test("curl --http2 and openssl s_client -alpn h2 complete a verified handshake with the CA")
    func toolsNoOneHereWrote() async throws {
        try await TLSTestSystem.run { tls in
            let curl = try await Curl.run([
                "--http2", "-sS", "--cacert", tls.caFile, "--resolve", "api.push.apple.com:\(tls.port):127.0.0.1",
                "-o", "/dev/null", "-w", "%{http_version} %{http_code}", "https://api.push.apple.com:\(tls.port)/health",
            ])
            #expect(curl == "2 200")
            let openssl = try await ChildProcess.run(
                "openssl", ["s_client", "-alpn", "h2", "-CAfile", tls.caFile, "-connect", "127.0.0.1:\(tls.port)", "-servername", "fcm.googleapis.com"]
            )
            #expect(openssl.text.contains("ALPN protocol: h2"), "\(openssl.text.suffix(400))")
            #expect(openssl.text.contains("Verify return code: 0 (ok)"))
            // A name the certificate is not for fails verification.
            let wrongName = try await ChildProcess.run(
                "curl", ["-sS", "--cacert", tls.caFile, "--resolve", "example.org:\(tls.port):127.0.0.1", "https://example.org:\(tls.port)/health"]
            )
            #expect(wrongName.status != 0)
        }
    }

    @Test("an HTTP/2 client that offers no ALPN and sends the preface at once is served (as aioapns does)")
    func http2WithoutALPN() async throws {
        try await TLSTestSystem.run { tls in
            // The preface and an empty SETTINGS frame; the server must answer with its SETTINGS frame.
            let frames = HTTPVersionSniff.http2Preface + [0, 0, 0, 4, 0, 0, 0, 0, 0]
            let answer = try await ChildProcess.run(
                "openssl", ["s_client", "-quiet", "-CAfile", tls.caFile, "-connect", "127.0.0.1:\(tls.port)", "-servername", "api.push.apple.com"],
                // Input held open 3 s for the answer (a loaded machine is slow to it); the limit
                // only bounds a hang.
                input: Data(frames), holdInput: .seconds(3), limit: .seconds(60)
            )
            let bytes = [UInt8](answer.output)
            let settings = (0..<max(0, bytes.count - 8)).contains { bytes[$0 + 3] == 4 && bytes[$0 + 4] == 0 && bytes[$0 + 5...$0 + 8].allSatisfy { $0 == 0 } }
            #expect(settings, "no SETTINGS frame in \(bytes.prefix(64))")
        }
    }

    @Test("garbage, plaintext, stalled handshakes and HTTP/2 garbage are closed, and the TLS port keeps serving")
    func malformedInput() async throws {
        var limits = ServerLimits()
        limits.headerTimeout = .seconds(1)
        try await TLSTestSystem.run(limits: limits) { tls in
            // Plain HTTP and random bytes instead of a ClientHello.
            for bytes in [Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".utf8), (0..<600).map { _ in UInt8.random(in: 0...255) }] {
                // Closed by the server (the 1 s header timeout at the latest), not left open until
                // the client gives up: within 40 s, long before the 75 s idle timeout, however
                // loaded the machine.
                let answer = try await RawSocket.exchange(port: tls.port, [(.zero, bytes)], waitFor: .seconds(40))
                #expect(answer.closed, "\(answer)")
                #expect(!answer.response.contains("200 OK"))
            }
            // A truncated ClientHello, then silence: closed by the header timeout.
            let stalled = try await RawSocket.exchange(port: tls.port, [(.zero, [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00])], waitFor: .seconds(40))
            #expect(stalled.closed, "\(stalled)")
            // After a real handshake: HTTP/2 preface then garbage frames, or an HTTP/1.1 line of junk.
            for payload in [HTTPVersionSniff.http2Preface + (0..<300).map { _ in UInt8.random(in: 0...255) }, Array("\u{1}\u{2}junk\r\n\r\n".utf8)] {
                let answer = try await ChildProcess.run(
                    "openssl", ["s_client", "-quiet", "-CAfile", tls.caFile, "-connect", "127.0.0.1:\(tls.port)"],
                    input: Data(payload), holdInput: .milliseconds(500), limit: .seconds(5)
                )
                #expect(!answer.text.contains("200 OK"))
            }
            // A client certificate that is garbage-signed cannot complete a handshake either way;
            // the port still answers real clients.
            let health = try await tls.withClient { client, base in try await client.send(.GET, "\(base)/health").status }
            #expect(health == 200)
            #expect(try await TestHTTP.request(.GET, tls.system.pushService + "/health").status == 200)
        }
    }

    /// The push-service inputs of the servers' fuzz corpus (Fuzz/corpus/servers: first byte '1'
    /// HTTP/1.1, '2' HTTP/2), each over TLS with the matching ALPN offer.
    @Test("the servers' fuzz corpus over TLS: HTTP/1.1 inputs get well-formed answers and no 5xx, and the TLS port keeps serving")
    func fuzzCorpusOverTLS() async throws {
        let folder = Repository.root.appendingPathComponent("Fuzz/corpus/servers")
        let inputs = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().compactMap { name -> (String, Bool, [UInt8])? in
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path), let first = data.first else { return nil }
            switch first % 3 {
            case 1: return (name, false, Array(data.dropFirst()))
            case 2: return (name, true, Array(data.dropFirst()))
            default: return nil
            }
        }
        #expect(inputs.count > 30)
        try await TLSTestSystem.run { tls in
            let client = try tls.clientTLS()
            var answered = 0
            for batch in stride(from: 0, to: inputs.count, by: 16).map({ Array(inputs[$0..<min($0 + 16, inputs.count)]) }) {
                let outcomes = try await withThrowingTaskGroup(of: (String, Bool, TLSRawExchange.Outcome).self) { group in
                    for (name, http2, bytes) in batch {
                        group.addTask {
                            let outcome = try await TLSRawExchange.run(
                                port: tls.port, tls: client, serverName: "api.push.apple.com", alpn: http2 ? ["h2"] : ["http/1.1"],
                                // Long enough for a handshake on a loaded machine: most inputs end sooner, answered and closed.
                                bytes: bytes, wait: .seconds(8)
                            )
                            return (name, http2, outcome)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                for (name, http2, outcome) in outcomes where !http2 && !outcome.answer.isEmpty {
                    answered += 1
                    let text = String(decoding: outcome.answer, as: UTF8.self)
                    #expect(text.hasPrefix("HTTP/1.1 "), "\(name): \(text.prefix(200))")
                    let status = Int(text.dropFirst(9).prefix(3)) ?? 0
                    #expect(status < 500 || status == 507, "\(name): \(text.prefix(300))")
                }
            }
            #expect(answered > 10)
            // Still serving, on both versions, and the cleartext port too.
            for http1Only in [false, true] {
                let health = try await tls.withClient(http1Only: http1Only) { client, base in try await client.send(.GET, "\(base)/health").status }
                #expect(health == 200)
            }
            #expect(try await TestHTTP.request(.GET, tls.system.pushService + "/health").status == 200)
        }
    }

    @Test("APNs provider tokens over one HTTP/2 connection: updates at most every 20 minutes, an hour's life, configured keys verify")
    func apnsTokensPerConnection() async throws {
        let other = P256.Signing.PrivateKey()
        let keys = [ProviderAuthConfiguration.APNsKey(
            keyID: TestCredentials.apnsKeyID, teamID: TestCredentials.apnsTeamID, publicKeyPEM: TestCredentials.apnsKey.publicKey.pemRepresentation
        )]
        try await TLSTestSystem.run(providerAuth: .init(apnsKeys: keys, apnsTopics: ["com.example.app"])) { tls in
            let token = TestDevice.randomToken(for: .apns)
            let now = Int64(Date().timeIntervalSince1970)
            func push(_ client: HTTPClient, _ base: String, _ headers: [(String, String)]) async throws -> (Int, String) {
                let answer = try await client.send(.POST, "\(base)/3/device/\(token)", headers: headers, body: Data(#"{"aps":{}}"#.utf8))
                return (answer.status, answer.text)
            }
            try await tls.withClient { client, base in
                let first = TestCredentials.apnsToken(issuedAt: now - 60)
                #expect(try await push(client, base, [("authorization", "bearer \(first)"), ("apns-topic", "com.example.app")]).0 == 200)
                // The same connection (HTTP/2 multiplexes), a token issued a minute later: too soon.
                let second = TestCredentials.apnsToken(issuedAt: now)
                let refused = try await push(client, base, [("authorization", "bearer \(second)"), ("apns-topic", "com.example.app")])
                #expect(refused.0 == 429 && refused.1.contains("TooManyProviderTokenUpdates"))
                #expect(try await push(client, base, [("authorization", "bearer \(first)"), ("apns-topic", "com.example.app")]).0 == 200)
                let cases: [([(String, String)], Int, String)] = [
                    ([("apns-topic", "com.example.app")], 403, "MissingProviderToken"),
                    ([("authorization", "bearer \(TestCredentials.apnsToken(issuedAt: now, key: other))"), ("apns-topic", "com.example.app")], 403, "InvalidProviderToken"),
                    ([("authorization", "bearer \(TestCredentials.apnsToken(issuedAt: now, keyID: "UNKNOWNKEY"))"), ("apns-topic", "com.example.app")], 403, "InvalidProviderToken"),
                    ([("authorization", "bearer \(TestCredentials.apnsToken(issuedAt: now - 3700))"), ("apns-topic", "com.example.app")], 403, "ExpiredProviderToken"),
                    ([("authorization", "bearer \(first)")], 400, "MissingTopic"),
                    ([("authorization", "bearer \(first)"), ("apns-topic", "com.example.other")], 400, "TopicDisallowed"),
                    ([("authorization", "bearer \(first)"), ("apns-topic", "a"), ("apns-topic", "b")], 400, "DuplicateHeaders"),
                ]
                for (headers, status, reason) in cases {
                    let answer = try await push(client, base, headers)
                    #expect(answer.0 == status && answer.1.contains(reason), "\(reason): \(answer)")
                }
                #expect(try await push(client, base, [("authorization", "bearer \(first)"), ("apns-topic", "com.example.app.voip")]).0 == 200)
                let wrongMethod = try await client.send(.GET, "\(base)/3/device/\(token)")
                #expect(wrongMethod.status == 405 && wrongMethod.text.contains("MethodNotAllowed"))
                let badPath = try await client.send(.POST, "\(base)/3/somewhere", headers: Self.apnsHeaders, body: Data("{}".utf8))
                #expect(badPath.status == 404 && badPath.text.contains("BadPath"))
            }
            // A new connection may start with the newer token.
            let fresh = try await tls.withClient { client, base in
                try await push(client, base, [("authorization", "bearer \(TestCredentials.apnsToken(issuedAt: now))"), ("apns-topic", "com.example.app")])
            }
            #expect(fresh.0 == 200)
        }
    }

    @Test("a configured service account: its signature verified, another key refused, the token's project and scopes checked")
    func googleServiceAccount() async throws {
        let account = ProviderAuthConfiguration.ServiceAccount(
            email: "sender@demo.iam.gserviceaccount.com", projectID: "demo",
            publicKeyPEM: try await TestCredentials.googleKey().publicKey.pemRepresentation
        )
        try await TLSTestSystem.run(providerAuth: .init(serviceAccounts: [account])) { tls in
            let push = tls.system.pushService
            #expect(try await TestCredentials.googleTokenResponse(pushService: push, assertion: try await TestCredentials.googleAssertion()).status == 200)
            // Another signature over the same claims (a byte of the real one changed).
            var parts = try await TestCredentials.googleAssertion().split(separator: ".").map(String.init)
            parts[2] = (parts[2].first == "A" ? "B" : "A") + parts[2].dropFirst()
            let forged = parts.joined(separator: ".")
            let refused = try await TestCredentials.googleTokenResponse(pushService: push, assertion: forged)
            #expect(refused.status == 400 && refused.text.contains("Invalid JWT Signature"))
            let stranger = try await TestCredentials.googleTokenResponse(
                pushService: push, assertion: try await TestCredentials.googleAssertion(account: "x@other.iam.gserviceaccount.com")
            )
            #expect(stranger.status == 400 && stranger.text.contains("invalid_grant"))
            let narrow = try await TestCredentials.googleTokenResponse(
                pushService: push, assertion: try await TestCredentials.googleAssertion(scope: "https://www.googleapis.com/auth/userinfo.email")
            )
            let access = try JSONDecoder().decode([String: TestCredentials.TokenValue].self, from: narrow.body)["access_token"]?.text
            let send = try await TestHTTP.request(
                .POST, "\(push)/v1/projects/demo/messages:send", body: Data(#"{"message":{"token":"abc"}}"#.utf8),
                headers: [("authorization", "Bearer \(access ?? "")")]
            )
            #expect(send.status == 403 && send.text.contains("ACCESS_TOKEN_SCOPE_INSUFFICIENT"))
        }
    }

    /// A self-signed client certificate whose subject UID names `bundle`, as Apple's push
    /// certificates do.
    static func clientCertificate(bundle: String) throws -> (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey) {
        let key = P256.Signing.PrivateKey()
        let uid: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]
        let name = DistinguishedName([
            RelativeDistinguishedName(.init(type: uid, utf8String: bundle)),
            RelativeDistinguishedName(.init(type: .RDNAttributeType.commonName, utf8String: "Apple Push Services: \(bundle)")),
        ])
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey), notValidBefore: Date() - 3600,
            notValidAfter: Date() + 86_400, issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions { try ExtendedKeyUsage([.clientAuth]) }, issuerPrivateKey: .init(key)
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return (
            [try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der)],
            try NIOSSLPrivateKey(bytes: Array(key.pemRepresentation.utf8), format: .pem)
        )
    }

    @Test("certificate-based APNs auth: the client certificate's bundle is the topic; no token needed")
    func apnsClientCertificate() async throws {
        try await TLSTestSystem.run { tls in
            let device = try await TestDevice.connect(pushService: tls.system.pushService, platform: .apns)
            let certificate = try Self.clientCertificate(bundle: "com.example.certified")
            try await tls.withClient(certificate: certificate) { client, base in
                let url = "\(base)/3/device/\(device.address!.token)"
                let noTopic = try await client.send(.POST, url, body: Data(#"{"aps":{"alert":"by certificate"}}"#.utf8))
                #expect(noTopic.status == 200, "\(noTopic.text)")
                let voip = try await client.send(.POST, url, headers: [("apns-topic", "com.example.certified.voip")], body: Data("{}".utf8))
                #expect(voip.status == 200)
                let other = try await client.send(.POST, url, headers: [("apns-topic", "com.example.other")], body: Data("{}".utf8))
                #expect(other.status == 400 && other.text.contains("TopicDisallowed"))
            }
            #expect(try await device.waitForPushes(1)[0].body.contains("by certificate"))
            // Without a certificate the same port wants a token.
            try await tls.withClient { client, base in
                let answer = try await client.send(.POST, "\(base)/3/device/\(device.address!.token)", headers: [("apns-topic", "x")], body: Data("{}".utf8))
                #expect(answer.status == 403 && answer.text.contains("MissingProviderToken"))
            }
        }
    }

    @Test("client certificates must chain to the configured CA when one is given")
    func apnsClientCertificateAuthority() async throws {
        let trusted = try TLSIdentity.generate(names: ["localhost"])
        try await TLSTestSystem.run(clientCertificates: .optional(trustRootsPEM: trusted.authorityPEM)) { tls in
            let stranger = try Self.clientCertificate(bundle: "com.example.stranger")
            await #expect(throws: (any Error).self) {
                try await tls.withClient(certificate: stranger) { client, base in _ = try await client.send(.GET, "\(base)/health") }
            }
            let health = try await tls.withClient { client, base in try await client.send(.GET, "\(base)/health").status }
            #expect(health == 200)
        }
    }
}
