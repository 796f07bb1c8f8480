import Crypto
import Foundation
import NIOHTTP1
import PushFleetCore
import PushFleetTestSupport
import PushFleetWebPush
import PushFleetWire
import Testing

/// The push service's Web Push side over real sockets: subscriptions minted in each service's
/// endpoint form, messages sent as an application server sends them (encrypted, VAPID-signed),
/// received and decrypted by a browser on the gateway, and RFC 8030's refusals.
@Suite("Web Push at the push service")
struct WebPushServiceTests {
    struct Minted: Decodable {
        var endpoint: String
        var token: String
    }

    static func subscribe(_ system: TestSystem, service: String = "fcm", key: P256.Signing.PrivateKey? = nil) async throws -> Minted {
        var request: [String: String] = ["service": service]
        if let key { request["applicationServerKey"] = Base64URL.encode(key.publicKey.x963Representation) }
        let response = try await TestHTTP.request(.POST, "\(system.pushService)/webpush/subscriptions", json: request)
        #expect(response.status == 201, "\(response.text)")
        return try response.json(Minted.self)
    }

    /// A message as an application server sends it: encrypted for `browser`, signed with `vapid`.
    static func send(
        _ plaintext: String?, to endpoint: String, browser: WebPushKeys, vapid: P256.Signing.PrivateKey? = nil, encoding: WebPushContentEncoding = .aes128gcm,
        headers extra: [(String, String)] = [("TTL", "60")], expiresIn: Int64 = 3600, audience: String? = nil
    ) async throws -> TestResponse {
        var headers = extra
        var body: Data?
        if let plaintext {
            let sealed = try WebPushEncryption.encrypt(
                Data(plaintext.utf8), for: try WebPushRecipient(p256dh: browser.p256dh, auth: browser.auth), encoding: encoding
            )
            body = sealed.body
            headers += [("Content-Encoding", encoding.rawValue), ("Content-Type", "application/octet-stream")]
            if let encryption = sealed.encryption { headers.append(("Encryption", encryption)) }
            if let cryptoKey = sealed.cryptoKey { headers.append(("Crypto-Key", cryptoKey)) }
        }
        if let vapid {
            let target = URL(string: audience ?? endpoint)!
            headers.append(
                ("Authorization", try VAPID.authorization(for: target, key: vapid, subject: "mailto:ops@example.com", expiresAt: Int64(Date().timeIntervalSince1970) + expiresIn))
            )
        }
        return try await TestHTTP.request(.POST, endpoint, body: body ?? Data(), headers: headers)
    }

    static func decrypt(_ frame: PushFrame, with browser: WebPushKeys) throws -> String {
        let encoding = try #require(frame.webPush?.contentEncoding.flatMap(WebPushContentEncoding.init(rawValue:)))
        let body = try #require(Data(base64Encoded: frame.body))
        let plaintext = try WebPushEncryption.decrypt(body, encoding: encoding, encryption: frame.webPush?.encryption, cryptoKey: frame.webPush?.cryptoKey, keys: browser)
        return String(decoding: plaintext, as: UTF8.self)
    }

    @Test("each service's endpoint form takes an aes128gcm and an aesgcm message, answers 201, and the browser decrypts both")
    func endpointForms() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let forms = ["fcm": "/fcm/send/", "mozilla": "/wpush/v2/", "windows": "/w/?token=", "apple": "/"]
            for (service, path) in forms.sorted(by: { $0.key < $1.key }) {
                let vapid = P256.Signing.PrivateKey()
                let minted = try await Self.subscribe(system, service: service, key: vapid)
                #expect(minted.endpoint == "\(system.pushService)\(path)\(minted.token)", "\(service)")
                let browser = WebPushKeys.generate()
                let device = try await TestDevice.connect(pushService: system.pushService, platform: .webpush, token: minted.token)
                defer { device.close() }
                for encoding in WebPushContentEncoding.allCases {
                    let sent = try await Self.send("hello \(service) \(encoding)", to: minted.endpoint, browser: browser, vapid: vapid, encoding: encoding)
                    #expect(sent.status == 201, "\(service) \(encoding): \(sent.text)")
                    #expect(sent.headers.first(name: "Location")?.hasPrefix("\(system.pushService)/m/") == true)
                    #expect(sent.headers.first(name: "TTL") == "60")
                }
                let frames = try await device.waitForPushes(2)
                #expect(try frames.map { try Self.decrypt($0, with: browser) } == ["hello \(service) aes128gcm", "hello \(service) aesgcm"])
                #expect(frames.allSatisfy { $0.platform == .webpush && $0.webPush?.ttl == 60 })
            }
        }
    }

    @Test("RFC 8030 and 8292 refusals: TTL, Urgency, Topic, size, encryption, VAPID, unknown and unsubscribed endpoints, throttling")
    func refusals() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let vapid = P256.Signing.PrivateKey()
            let bound = try await Self.subscribe(system, key: vapid)
            let open = try await Self.subscribe(system)
            let browser = WebPushKeys.generate()
            let other = P256.Signing.PrivateKey()
            func status(_ response: TestResponse) -> Int { response.status }
            #expect(status(try await Self.send("x", to: bound.endpoint, browser: browser, vapid: vapid, headers: [])) == 400, "no TTL")
            #expect(status(try await Self.send("x", to: bound.endpoint, browser: browser, vapid: vapid, headers: [("TTL", "-1")])) == 400)
            #expect(status(try await Self.send("x", to: bound.endpoint, browser: browser, vapid: vapid, headers: [("TTL", "5"), ("Urgency", "urgent")])) == 400)
            #expect(status(try await Self.send("x", to: bound.endpoint, browser: browser, vapid: vapid, headers: [("TTL", "5"), ("Topic", "has space")])) == 400)
            #expect(status(try await Self.send("x", to: bound.endpoint, browser: browser, vapid: vapid, headers: [("TTL", "5"), ("Topic", String(repeating: "t", count: 33))])) == 400)
            #expect(status(try await Self.send(String(repeating: "x", count: 4_000), to: bound.endpoint, browser: browser, vapid: vapid)) == 413)
            let plain = try await TestHTTP.request(.POST, open.endpoint, body: Data("not encrypted".utf8), headers: [("TTL", "5")])
            #expect(plain.status == 400, "a payload without Content-Encoding")
            let bare = try await TestHTTP.request(.POST, open.endpoint, body: Data(repeating: 1, count: 50), headers: [("TTL", "5"), ("Content-Encoding", "aesgcm")])
            #expect(bare.status == 400, "aesgcm without Encryption and Crypto-Key")
            #expect(status(try await Self.send("x", to: bound.endpoint, browser: browser)) == 401, "a restricted subscription without VAPID")
            #expect(status(try await Self.send("x", to: bound.endpoint, browser: browser, vapid: other)) == 403, "another key than the subscription's")
            #expect(status(try await Self.send("x", to: bound.endpoint, browser: browser, vapid: vapid, expiresIn: -10)) == 401, "expired")
            #expect(status(try await Self.send("x", to: bound.endpoint, browser: browser, vapid: vapid, expiresIn: 100_000)) == 401, "more than 24 h")
            #expect(status(try await Self.send("x", to: bound.endpoint, browser: browser, vapid: vapid, audience: "https://elsewhere.example")) == 401, "aud")
            #expect(status(try await Self.send("x", to: open.endpoint, browser: browser, vapid: other)) == 201, "any valid VAPID on an open subscription")
            #expect(status(try await Self.send(nil, to: open.endpoint, browser: browser)) == 201, "a message without payload")
            let long = try await Self.send("x", to: open.endpoint, browser: browser, headers: [("TTL", "99999999"), ("Urgency", "high"), ("Topic", "scores")])
            #expect(long.status == 201 && long.headers.first(name: "TTL") == "2419200", "TTL cut to four weeks")
            #expect(status(try await Self.send("x", to: "\(system.pushService)/wpush/v2/\(WebPushKeysToken.unknown)", browser: browser)) == 404)

            try await system.setFaults(FaultSettings(throttle: 1))
            let throttled = try await Self.send("x", to: open.endpoint, browser: browser)
            #expect(throttled.status == 429 && throttled.headers.first(name: "Retry-After") != nil)
            try await system.setFaults(FaultSettings())

            let gone = try await TestHTTP.request(.DELETE, "\(system.pushService)/webpush/subscriptions/\(open.token)")
            #expect(gone.status == 204)
            #expect(status(try await Self.send("x", to: open.endpoint, browser: browser)) == 410, "unsubscribed")
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .webpush, token: open.token)
            defer { device.close() }
            #expect(status(try await Self.send("x", to: open.endpoint, browser: browser)) == 410, "a browser coming back does not revive the endpoint")
            #expect(try await TestHTTP.request(.DELETE, "\(system.pushService)/webpush/subscriptions/\(WebPushKeysToken.unknown)").status == 404)
            let stats = try await system.pushStats()
            #expect(stats.webPushSubscriptions == 2)
            #expect(stats.rejected["webpush:400"] == 7 && stats.rejected["webpush:401"] == 4 && stats.rejected["webpush:410"] == 2)
        }
    }

    @Test("over TLS, by hosts entries, each service's host mints its own endpoint form and takes messages over HTTP/2 and HTTP/1.1")
    func overTLS() async throws {
        try await TLSTestSystem.run { tls in
            let forms = [
                ("fcm.googleapis.com", "fcm", "/fcm/send/"), ("updates.push.services.mozilla.com", "mozilla", "/wpush/v2/"),
                ("wns2-pf.notify.windows.com", "windows", "/w/?token="), ("web.push.apple.com", "apple", "/"),
            ]
            for (host, service, path) in forms {
                for http1Only in [false, true] {
                    try await tls.withClient(host: host, http1Only: http1Only) { client, base in
                        let vapid = P256.Signing.PrivateKey()
                        let asked = try JSONEncoder().encode(["service": service, "applicationServerKey": Base64URL.encode(vapid.publicKey.x963Representation)])
                        let minted = try await client.send(.POST, "\(base)/webpush/subscriptions", headers: [("Content-Type", "application/json")], body: asked)
                        #expect(minted.status == 201)
                        let subscription = try JSONDecoder().decode(Minted.self, from: Data(minted.text.utf8))
                        #expect(subscription.endpoint == "\(base)\(path)\(subscription.token)", "\(host)")
                        // Asked for the public form, the endpoint names the real service's host and this TLS port.
                        let publicForm = try await client.send(
                            .POST, "\(base)/webpush/subscriptions", headers: [("Content-Type", "application/json")],
                            body: Data(#"{"service":"\#(service)","public":true}"#.utf8)
                        )
                        let publicHost = service == "windows" ? "wns2-pf.notify.windows.com" : host
                        let publicToken = try JSONDecoder().decode(Minted.self, from: Data(publicForm.text.utf8)).token
                        #expect(try JSONDecoder().decode(Minted.self, from: Data(publicForm.text.utf8)).endpoint == "https://\(publicHost):\(tls.port)\(path)\(publicToken)")
                        let browser = WebPushKeys.generate()
                        let device = try await TestDevice.connect(
                            pushService: "https://localhost:\(tls.port)", platform: .webpush, token: subscription.token, tls: try tls.clientTLS()
                        )
                        defer { device.close() }
                        let sealed = try WebPushEncryption.encrypt(Data("over \(host)".utf8), for: try WebPushRecipient(p256dh: browser.p256dh, auth: browser.auth))
                        let authorization = try VAPID.authorization(
                            for: URL(string: subscription.endpoint)!, key: vapid, subject: "https://example.com/contact", expiresAt: Int64(Date().timeIntervalSince1970) + 600
                        )
                        let sent = try await client.send(
                            .POST, subscription.endpoint, headers: [("TTL", "30"), ("Content-Encoding", "aes128gcm"), ("Authorization", authorization)], body: sealed.body
                        )
                        #expect(sent.status == 201, "\(host) \(http1Only ? "HTTP/1.1" : "HTTP/2"): \(sent.text)")
                        #expect(sent.version.major == (http1Only ? 1 : 2))
                        #expect(sent.headers.first(name: "Location")?.hasPrefix("\(base)/m/") == true)
                        #expect(try Self.decrypt(try await device.waitForPushes(1)[0], with: browser) == "over \(host)")
                    }
                }
            }
        }
    }

    @Test("hostile subscription requests and hosts are refused with a clear status, never a crash")
    func hostile() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let url = "\(system.pushService)/webpush/subscriptions"
            let bodies: [(String, Data, Int)] = [
                ("not JSON", Data("{nope".utf8), 400),
                ("a key that is no point", Data(#"{"applicationServerKey":"BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}"#.utf8), 400),
                ("a key of 3 bytes", Data(#"{"applicationServerKey":"AAAA"}"#.utf8), 400),
                ("an unknown service", Data(#"{"service":"blackberry"}"#.utf8), 400),
                ("a token with a slash", Data(#"{"token":"abcdefghijklmnop/q"}"#.utf8), 400),
                ("a token of 600 characters", Data(#"{"token":"\#(String(repeating: "a", count: 600))"}"#.utf8), 400),
                ("a body over 4 KB", Data(#"{"token":"\#(String(repeating: "a", count: 5000))"}"#.utf8), 413),
                // No TLS listener here: an https endpoint on fcm.googleapis.com would reach nothing.
                ("a public endpoint without TLS", Data(#"{"public":true}"#.utf8), 400),
                ("public that is no boolean", Data(#"{"public":"yes"}"#.utf8), 400),
            ]
            for (name, body, status) in bodies {
                #expect(try await TestHTTP.request(.POST, url, body: body).status == status, "\(name)")
            }
            let minted = try await Self.subscribe(system)
            let port = Int(system.pushService.split(separator: ":").last!)!
            let path = "/fcm/send/\(minted.token)"
            for host in ["a b", "[::1", "%zz", "", "x:notaport"] {
                let request = "POST \(path) HTTP/1.1\r\nHost: \(host)\r\nTTL: 5\r\nAuthorization: vapid t=a.b.c, k=AAAA\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                // The answer ends with the close it asks for; the wait only bounds a server that
                // never answers (5 s ran out beside the whole suite on a loaded machine).
                let outcome = try await RawStream.run(port: port, [(.zero, Array(request.utf8))], wait: .seconds(60))
                #expect(outcome.text.hasPrefix("HTTP/1.1 4"), "Host '\(host)': \(outcome.text.prefix(60))")
            }
            #expect(try await TestHTTP.request(.GET, "\(system.pushService)/health").status == 200, "still serving")
        }
    }

    @Test("the faults act on Web Push as on the other platforms: unregistered 410, dropped, delayed, browsers disconnected")
    func faults() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let minted = try await Self.subscribe(system)
            let browser = WebPushKeys.generate()
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .webpush, token: minted.token)
            defer { device.close() }

            try await system.setFaults(FaultSettings(unregisteredTokens: [minted.token]))
            #expect(try await Self.send("x", to: minted.endpoint, browser: browser).status == 410)
            try await system.setFaults(FaultSettings(drop: 1))
            #expect(try await Self.send("dropped", to: minted.endpoint, browser: browser).status == 201, "accepted, then dropped")
            try await system.setFaults(FaultSettings(latency: .fixed(ms: 300)))
            let sent = ContinuousClock.now
            #expect(try await Self.send("late", to: minted.endpoint, browser: browser).status == 201)
            let frames = try await device.waitForPushes(1)
            #expect(ContinuousClock.now - sent >= .milliseconds(300))
            #expect(try Self.decrypt(frames[0], with: browser) == "late", "the dropped one never came")
            #expect(frames[0].delay == 300_000_000)
            try await system.setFaults(FaultSettings())

            let result = try await TestHTTP.request(.POST, "\(system.pushService)/admin/disconnect", auth: system.admin, json: DisconnectRequest(tokens: [minted.token]))
            #expect(try result.json(DisconnectResult.self).disconnected == 1)
            try await device.waitFor { $0.closed }
            let stats = try await system.pushStats()
            #expect(stats.dropped == 1 && stats.rejected["webpush:410"] == 1 && stats.online == 0)
        }
    }

    @Test("messages for an offline browser are all held until their TTL; a Topic replaces its namesake; TTL 0 is delivered only to one online")
    func held() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let minted = try await Self.subscribe(system, service: "mozilla")
            let browser = WebPushKeys.generate()
            let sends: [(String, [(String, String)])] = [
                ("now or never", [("TTL", "0")]), ("a", [("TTL", "60")]), ("b", [("TTL", "60"), ("Topic", "score")]), ("short", [("TTL", "1")]),
                ("c", [("TTL", "60")]), ("d", [("TTL", "60"), ("Topic", "score")]),
            ]
            for (text, headers) in sends {
                #expect(try await Self.send(text, to: minted.endpoint, browser: browser, headers: headers).status == 201)
            }
            try await Task.sleep(for: .milliseconds(1_300))
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .webpush, token: minted.token)
            defer { device.close() }
            let frames = try await device.waitForPushes(3)
            #expect(try frames.map { try Self.decrypt($0, with: browser) } == ["a", "d", "c"], "d took b's place; short expired; TTL 0 was never held")
            #expect(frames.allSatisfy { $0.stored })
            #expect(try await Self.send("live", to: minted.endpoint, browser: browser, headers: [("TTL", "0")]).status == 201)
            #expect(try await device.waitForPushes(4).last.map { try Self.decrypt($0, with: browser) } == "live")
            let stats = try await system.pushStats()
            #expect(stats.storedReplaced == 1 && stats.held == 0 && stats.expired == 1 && stats.discardedOffline == 1)
        }
    }
}

enum WebPushKeysToken {
    /// Well-formed, never minted.
    static let unknown = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
}
