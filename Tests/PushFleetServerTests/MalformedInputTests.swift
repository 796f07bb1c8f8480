import Foundation
import NIOHTTP1
import PushFleetTestSupport
import PushFleetWire
import Testing

/// Every endpoint answers bad input with a 4xx, and the servers keep serving.
@Suite("Malformed input")
struct MalformedInputTests {
    struct Case: CustomStringConvertible {
        var method: HTTPMethod
        var path: String
        var body: Data?
        var headers: [(String, String)] = []
        var auth: TestAuth? = .user("alice")
        /// Sent with the push service's admin token; only a 400 (the validation) will do.
        var admin = false
        var description: String { "\(method) \(path)" }
    }

    static func json(_ text: String) -> Data { Data(text.utf8) }

    static let backendCases: [Case] = [
        Case(method: .PUT, path: "/api/register/x", body: json("{")),
        Case(method: .PUT, path: "/api/register/x", body: json(#"{"Platform":1,"Handle":"h"}"#)),
        Case(method: .PUT, path: "/api/register/x", body: json(#"{"Platform":"apns"}"#)),
        Case(method: .PUT, path: "/api/register/x", body: json(#"{"Platform":"blackberry","Handle":"h"}"#)),
        Case(method: .PUT, path: "/api/register/x", body: json(#"{"Platform":"apns","Handle":""}"#)),
        Case(method: .PUT, path: "/api/register/x", body: json(#"{"Platform":"apns","Handle":"a b"}"#)),
        Case(method: .PUT, path: "/api/register/x", body: json(#"{"Platform":"apns","Handle":"h","Tags":"t"}"#)),
        Case(method: .PUT, path: "/api/register/x", body: json(#"{"Platform":"apns","Handle":"h","Tags":["bad tag"]}"#)),
        Case(method: .PUT, path: "/api/register/x", body: json(#"{"Platform":"apns","Handle":"h","Tags":["\#(String(repeating: "t", count: 121))"]}"#)),
        Case(
            method: .PUT, path: "/api/register/x",
            body: json(#"{"Platform":"apns","Handle":"h","Tags":[\#((0..<61).map { "\"t\($0)\"" }.joined(separator: ","))]}"#)
        ),
        Case(method: .PUT, path: "/api/register/x", body: Data(repeating: 32, count: 70_000)),
        Case(method: .POST, path: "/api/register?handle=\(String(repeating: "h", count: 2000))"),
        Case(method: .POST, path: "/api/notifications?pns=apns", body: json(#""hi""#)),
        Case(method: .POST, path: "/api/notifications?to_tag=bob", body: json(#""hi""#)),
        Case(method: .POST, path: "/api/notifications?pns=carrier-pigeon&to_tag=bob", body: json(#""hi""#)),
        Case(method: .POST, path: "/api/notifications?pns=mpns&to_tag=bob", body: json(#""hi""#)),
        Case(method: .POST, path: "/api/notifications?pns=apns&to_tag=bob", body: json(#"{"message":"hi"}"#)),
        Case(method: .POST, path: "/api/notifications?pns=apns&to_tag=bob", body: json(#""\#(String(repeating: "m", count: 3000))""#)),
        // Any user name has a tag, but escaping lengthens it: 40 `&` escape past the tag limit.
        Case(method: .POST, path: "/api/notifications?pns=apns&to_tag=\(String(repeating: "%26", count: 40))", body: json(#""hi""#)),
        // Within 2,000 bytes, but past a push service's limit once escaped: 413, not a 500 Abandoned.
        Case(method: .POST, path: "/api/notifications?pns=apns&to_tag=bob", body: json("\"" + String(repeating: "\\u0001", count: 700) + "\"")),
        Case(method: .POST, path: "/api/notifications?pns=wns&to_tag=bob", body: json("\"" + String(repeating: "\\\"", count: 1990) + "\"")),
        Case(method: .POST, path: "/api/notifications/rich?to_tag=bob", body: json("\"" + String(repeating: "m", count: 2500) + "\"")),
        Case(method: .POST, path: "/api/notifications/rich?to_tag=bob", body: json("\"" + String(repeating: "\\u0002", count: 700) + "\"")),
        Case(method: .POST, path: "/api/notifications/secure?to_tag=bob", body: json("42")),
        Case(method: .POST, path: "/api/notifications/rich?to_tag=bob", body: json(#"{"image":"x"}"#)),
        Case(method: .POST, path: "/api/notifications/rich?to_tag=bob", body: json(#"{"message":"m","image":"!!"}"#)),
        Case(method: .POST, path: "/api/notifications/rich?to_tag=bob", body: json(#"{"message":"m","contentType":"text/html"}"#)),
        Case(method: .GET, path: "/api/notifications/unknown"),
        Case(method: .GET, path: "/api/nothing-here"),
        Case(method: .PATCH, path: "/api/register/x", body: json("{}")),
    ]

    static let pushCases: [Case] = [
        Case(method: .PUT, path: "/admin/faults", body: json("{"), auth: nil, admin: true),
        Case(method: .PUT, path: "/admin/faults", body: json(#"{"latency":{"kind":"uniform","minMs":5,"maxMs":1}}"#), auth: nil, admin: true),
        Case(method: .PUT, path: "/admin/faults", body: json(#"{"latency":{"kind":"gaussian"}}"#), auth: nil, admin: true),
        Case(method: .POST, path: "/admin/disconnect", body: json(#"{"ratio":-1}"#), auth: nil, admin: true),
        Case(method: .GET, path: "/device?platform=apns", auth: nil),
        Case(method: .GET, path: "/device?platform=sms&token=abcd", auth: nil),
        Case(method: .GET, path: "/3/device/abcd", auth: nil),
        Case(method: .POST, path: "/v1/projects/demo/messages:send", body: json("[]"), headers: [("authorization", fcmCredentials)], auth: nil),
        Case(method: .POST, path: "/wns/a*b", body: json("x"), headers: [("authorization", wnsCredentials), ("X-WNS-Type", "wns/raw")], auth: nil),
        Case(method: .GET, path: "/nowhere", auth: nil),
    ]

    /// Stand-ins in cases for access tokens fetched from the system under test.
    static let fcmCredentials = "<fcm access token>"
    static let wnsCredentials = "<wns access token>"

    @Test("bad requests to the backend get a 4xx", arguments: backendCases)
    func backend(_ item: Case) async throws {
        try await check(item, toBackend: true)
    }

    @Test("bad requests to the push service get a 4xx", arguments: pushCases)
    func pushService(_ item: Case) async throws {
        try await check(item, toBackend: false)
    }

    private func check(_ item: Case, toBackend: Bool) async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            var headers: [(String, String)] = []
            for (name, value) in item.headers {
                switch value {
                case Self.fcmCredentials: headers.append((name, try await TestCredentials.fcmAuthorization(pushService: system.pushService)))
                case Self.wnsCredentials: headers.append((name, try await TestCredentials.wnsAuthorization(pushService: system.pushService)))
                default: headers.append((name, value))
                }
            }
            let response = try await TestHTTP.request(
                item.method, (toBackend ? system.backend : system.pushService) + item.path, auth: item.admin ? system.admin : item.auth,
                body: item.body, headers: headers
            )
            #expect((400..<500).contains(response.status), "\(item) answered \(response.status): \(response.text)")
            if item.admin { #expect(response.status == 400, "\(item) answered \(response.status): \(response.text)") }
            #expect(try await TestHTTP.request(.GET, system.backend + "/health").status == 200)
            #expect(try await TestHTTP.request(.GET, system.pushService + "/health").status == 200)
        }
    }

    @Test("out-of-range expirations, TTLs and fault latencies are answered, never a crash")
    func outOfRangeNumbers() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let token = String(repeating: "ab", count: 32)
            let apns = try await system.apnsPush(token: token, headers: [("apns-expiration", "10000000000")])
            #expect(apns.status == 200, "\(apns.text)")
            let wns = try await TestHTTP.request(
                .POST, "\(system.pushService)/wns/channel-9", body: Data("x".utf8),
                headers: [
                    ("authorization", try await TestCredentials.wnsAuthorization(pushService: system.pushService)), ("X-WNS-Type", "wns/raw"),
                    ("X-WNS-Cache-Policy", "cache"), ("X-WNS-TTL", "10000000000"),
                ]
            )
            #expect(wns.status == 200, "\(wns.text)")
            let fcm = try await TestHTTP.request(
                .POST, "\(system.pushService)/v1/projects/demo/messages:send",
                body: Self.json(#"{"message":{"token":"fcm_tok","data":{"a":"b"},"android":{"ttl":"100000d"}}}"#),
                headers: [
                    ("authorization", try await TestCredentials.fcmAuthorization(pushService: system.pushService)), ("content-type", "application/json"),
                ]
            )
            #expect(fcm.status == 200, "\(fcm.text)")
            let faults = try await TestHTTP.request(.PUT, "\(system.pushService)/admin/faults", auth: system.admin, body: Self.json(#"{"latency":{"kind":"fixed","ms":1e13}}"#))
            #expect(faults.status == 400, "\(faults.text)")
            #expect(try await system.apnsPush(token: token).status == 200)
            #expect(try await TestHTTP.request(.GET, system.pushService + "/health").status == 200)
        }
    }

    @Test("a message that outgrows the push services' limits once escaped is 413 for a recipient with devices, and nothing is stored")
    func escapedOversize() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            _ = try await system.device("bob", .apns)
            _ = try await system.device("bob", .wns)
            let controls = "\"" + String(repeating: "\\u0001", count: 700) + "\""
            let plain = try await TestHTTP.request(.POST, "\(system.backend)/api/notifications?pns=apns&to_tag=bob", auth: .user("alice"), body: Self.json(controls))
            #expect(plain.status == 413 && plain.text.contains("apns payload of"), "\(plain.status) \(plain.text)")
            let rich = try await TestHTTP.request(.POST, "\(system.backend)/api/notifications/rich?to_tag=bob", auth: .user("alice"), body: Self.json(controls))
            #expect(rich.status == 413, "\(rich.status) \(rich.text)")
            #expect(try await system.backendStats().storedNotifications == 0)
            // The same length of plain text goes through.
            let fine = try await TestHTTP.request(
                .POST, "\(system.backend)/api/notifications?pns=apns&to_tag=bob", auth: .user("alice"), body: Self.json("\"" + String(repeating: "m", count: 1999) + "\"")
            )
            #expect(fine.status == 200, "\(fine.text)")
        }
    }

    @Test("raw garbage on the sockets does not stop either server")
    func garbage() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            for base in [system.backend, system.pushService] {
                let port = Int(base.split(separator: ":").last!)!
                try await RawSocket.send("GARBAGE \u{01}\u{02}\r\n\r\n", port: port)
                try await RawSocket.send("POST /api/register HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", port: port)
                #expect(try await TestHTTP.request(.GET, base + "/health").status == 200)
            }
        }
    }
}
