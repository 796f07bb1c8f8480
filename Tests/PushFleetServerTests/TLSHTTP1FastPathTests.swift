import Foundation
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

/// HTTP/1.1 over the push service's TLS port: provider requests are answered from the decrypted
/// bytes (``HTTP1FastPath`` after the version sniff), and any other request hands the connection
/// to the full pipeline behind TLS. Told apart from outside by what each writes: the fast path
/// names its length `content-length` and no server; NIO's encoder, behind, writes
/// `Content-Length`, and the router adds `Server: pushfleet-mock-push-tls`.
@Suite("HTTP/1.1 over TLS at the fast path")
struct TLSHTTP1FastPathTests {
    static let token = String(repeating: "ab", count: 32)

    static func apns(closing: Bool = false, authorization: String? = nil) -> String {
        let body = #"{"aps":{"alert":"x"}}"#
        let auth = authorization.map { "authorization: \($0)\r\n" } ?? ""
        return "POST /3/device/\(token) HTTP/1.1\r\nHost: x\r\napns-topic: com.example.app\r\n\(auth)"
            + (closing ? "Connection: close\r\n" : "") + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    /// Each answer's status, whether the fast path wrote it, and whether it named the server.
    static func answers(_ bytes: [UInt8]) -> [(status: Substring, fast: Bool, server: Bool)] {
        String(decoding: bytes, as: UTF8.self).components(separatedBy: "HTTP/1.1 ").dropFirst().map { answer in
            (answer.prefix(3), answer.contains("\r\ncontent-length: "), answer.lowercased().contains("\r\nserver: pushfleet-mock-push-tls\r\n"))
        }
    }

    @Test("pipelined provider requests are answered here in order; a health check hands over, and the router answers behind TLS")
    func pipelinedThenHandedOver() async throws {
        try await TLSTestSystem.run { tls in
            let client = try tls.clientTLS()
            // Twenty in one write (no provider token: 403 each), then a request for the router,
            // then one more provider request, which the router's pipeline now answers too.
            let bytes = String(repeating: Self.apns(), count: 20) + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + Self.apns(closing: true)
            let outcome = try await TLSRawExchange.run(
                port: tls.port, tls: client, serverName: "api.push.apple.com", alpn: ["http/1.1"], bytes: Array(bytes.utf8), wait: .seconds(60)
            )
            let answers = Self.answers(outcome.answer)
            #expect(answers.map(\.status) == Array(repeating: "403", count: 20) + ["200", "403"], "\(answers)")
            #expect(answers.prefix(20).allSatisfy { $0.fast && !$0.server }, "a provider request went past the fast path: \(answers)")
            #expect(answers.suffix(2).allSatisfy { !$0.fast && $0.server }, "the requests after the hand-over were not the router's: \(answers)")
            #expect(String(decoding: outcome.answer, as: UTF8.self).components(separatedBy: "MissingProviderToken").count == 22)
            #expect(outcome.closed)

            // A malformed request after answered ones goes behind TLS to the full parser: 400, closed.
            let bad = try await TLSRawExchange.run(
                port: tls.port, tls: client, serverName: "api.push.apple.com", alpn: ["http/1.1"],
                bytes: Array((Self.apns() + "POST /3/device/\(Self.token) HTTP/1.1\r\nContent-Length: x\r\n\r\n").utf8), wait: .seconds(60)
            )
            let badAnswers = Self.answers(bad.answer)
            #expect(badAnswers.map(\.status) == ["403", "400"], "\(badAnswers)")
            #expect(badAnswers.first?.fast == true, "\(badAnswers)")
            #expect(bad.closed)
        }
    }

    @Test("a push over HTTP/1.1 and TLS reaches its device, by provider token and by client certificate")
    func pushesDelivered() async throws {
        try await TLSTestSystem.run { tls in
            let device = try await TestDevice.connect(pushService: tls.system.pushService, platform: .apns)
            let path = "/3/device/\(device.address!.token)"
            func exchange(_ requests: [(topic: String, authorization: String?, alert: String)], certificate: Bool) async throws -> [(status: Substring, fast: Bool, server: Bool)] {
                let client = try tls.clientTLS(certificate: certificate ? try TLSTests.clientCertificate(bundle: "com.example.certified") : nil)
                let bytes = requests.enumerated().map { index, request in
                    let body = #"{"aps":{"alert":"\#(request.alert)"}}"#
                    let auth = request.authorization.map { "authorization: \($0)\r\n" } ?? ""
                    let close = index == requests.count - 1 ? "Connection: close\r\n" : ""
                    return "POST \(path) HTTP/1.1\r\nHost: x\r\napns-topic: \(request.topic)\r\n\(auth)\(close)Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
                }.joined()
                let outcome = try await TLSRawExchange.run(
                    port: tls.port, tls: client, serverName: "api.push.apple.com", alpn: ["http/1.1"], bytes: Array(bytes.utf8), wait: .seconds(60)
                )
                #expect(outcome.closed)
                return Self.answers(outcome.answer)
            }
            let byToken = try await exchange((0..<3).map { ("com.example.app", TestCredentials.apnsAuthorization, "token \($0)") }, certificate: false)
            #expect(byToken.map(\.status) == ["200", "200", "200"], "\(byToken)")
            #expect(byToken.allSatisfy { $0.fast && !$0.server }, "answered past the fast path: \(byToken)")
            // A certificate for one bundle names the topic: the fast path sees the connection's certificate.
            let byCertificate = try await exchange(
                [("com.example.certified", nil, "by certificate"), ("com.example.other", nil, "other")], certificate: true
            )
            #expect(byCertificate.map(\.status) == ["200", "400"], "\(byCertificate)")
            #expect(byCertificate.allSatisfy { $0.fast && !$0.server }, "answered past the fast path: \(byCertificate)")
            let bodies = try await device.waitForPushes(4).map(\.body)
            #expect((0..<3).allSatisfy { number in bodies.contains { $0.contains("token \(number)") } } && bodies.contains { $0.contains("by certificate") })
        }
    }
}
