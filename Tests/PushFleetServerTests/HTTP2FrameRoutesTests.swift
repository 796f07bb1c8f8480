import Crypto
import Foundation
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

/// Provider streams answered at the connection's frames beside streams that go to the router, on
/// one HTTP/2 connection: each gets its own answer, whichever path it takes.
@Suite("HTTP/2 provider streams at the frames, beside the router's")
struct HTTP2FrameRoutesTests {
    static let token = String(repeating: "ab", count: 32)

    static func push(_ stream: UInt32, body: [UInt8], split: Bool = false) -> (now: [UInt8], later: [UInt8]) {
        let head = HTTP2Wire.headers(
            stream: stream, path: "/3/device/\(token)",
            extra: [("authorization", TestCredentials.apnsAuthorization), ("apns-topic", "com.example.app"), ("apns-push-type", "alert")],
            endStream: false
        )
        let data = HTTP2Wire.data(stream: stream, body, endStream: true)
        return split ? (head, data) : (head + data, [])
    }

    static let alert = Array(#"{"aps":{"alert":"x"}}"#.utf8)

    /// Stream 1 a push whose first token goes to the router to be verified, 3 a router GET, 5 a
    /// push whose body comes in a later write (handed to a stream channel), 7 a push with the
    /// token known (answered at the frames), 9 a push over APNs's payload limit, 11 a bad token.
    static func parts() -> [(delay: Duration, bytes: [UInt8])] {
        let fields: [(String, String)] = [(":method", "GET"), (":scheme", "http"), (":path", "/health"), (":authority", "localhost")]
        var block: [UInt8] = []
        for (name, value) in fields {
            block += [0x00] + HTTP2Wire.integer(name.utf8.count) + Array(name.utf8)
            block += HTTP2Wire.integer(value.utf8.count) + Array(value.utf8)
        }
        let health = HTTP2Wire.frame(type: HTTP2Wire.headersType, flags: 0x5, stream: 3, block)
        let split = push(5, body: alert, split: true)
        // Over APNs's 4,096 bytes, however the client declares it.
        let padded: [UInt8] = Array(repeating: UInt8(ascii: " "), count: 4100) + Self.alert
        let badToken = HTTP2Wire.headers(
            stream: 11, path: "/3/device/nothex",
            extra: [("authorization", TestCredentials.apnsAuthorization), ("apns-topic", "com.example.app")], endStream: false
        ) + HTTP2Wire.data(stream: 11, alert, endStream: true)
        return [
            (.zero, HTTP2Wire.preface + push(1, body: alert).now + health + split.now),
            (.milliseconds(500), split.later + push(7, body: alert).now),
            (.milliseconds(200), push(9, body: padded).now + badToken),
        ]
    }

    static let streams: Set<UInt32> = [1, 3, 5, 7, 9, 11]

    /// An APNs key configured, so that a connection's first token is verified by the router; h2c.
    static func configuration() -> EmbeddedSystem.Configuration {
        let keys = [ProviderAuthConfiguration.APNsKey(
            keyID: TestCredentials.apnsKeyID, teamID: TestCredentials.apnsTeamID, publicKeyPEM: TestCredentials.apnsKey.publicKey.pemRepresentation
        )]
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushService.providerAuth = ProviderAuthConfiguration(apnsKeys: keys, apnsTopics: ["com.example.app"])
        configuration.pushServer.http2Listen = .init(host: "127.0.0.1", port: 0)
        return configuration
    }

    @Test("pushes at the frames, a router GET, a body that comes later, one too large and a bad token: each answered on its stream, ending on its last frame")
    func mixedStreams() async throws {
        let configuration = Self.configuration()
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let port = Int(system.pushServiceHTTP2!.split(separator: ":").last!)!
            let outcome = try await RawStream.run(port: port, Self.parts(), wait: .seconds(60)) { bytes in
                Set(HTTP2Wire.frames(bytes).filter { $0.type <= 1 && $0.flags & 0x1 != 0 }.map(\.stream)).isSuperset(of: Self.streams)
            }
            let statuses = HTTP2Wire.statuses(outcome.bytes)
            #expect(statuses == [1: "200", 3: "200", 5: "200", 7: "200", 9: "413", 11: "400"], "\(statuses)")
            let frames = HTTP2Wire.frames(outcome.bytes).filter { $0.type <= 1 }
            for stream in Self.streams.sorted() {
                let mine = frames.filter { $0.stream == stream }
                #expect(mine.last.map { $0.flags & 0x1 != 0 } == true, "stream \(stream): \(mine)")
                #expect(!mine.contains { $0.type == 0 && $0.payload.isEmpty }, "stream \(stream): \(mine)")
            }
            let bodies = Dictionary(grouping: frames.filter { $0.type == 0 }, by: \.stream).mapValues { String(decoding: $0.flatMap(\.payload), as: UTF8.self) }
            #expect(bodies[9]?.contains("PayloadTooLarge") == true, "\(bodies)")
            #expect(bodies[11]?.contains("BadDeviceToken") == true, "\(bodies)")
            #expect(bodies[3] == "ok", "\(bodies)")
            // The three accepted pushes reached the service, once each.
            #expect(try await system.pushStats().accepted == 3)
        }
    }

    static func port(_ address: String) -> Int {
        Int(address.split(separator: ":").last!.filter(\.isNumber))!
    }

    /// The first push of a connection waits for its provider token to be verified off the event
    /// loop; one too large must still be judged too large there, not empty.
    @Test("a push too large, first on its connection, while its provider token is verified by the router: 413 PayloadTooLarge over h2c and HTTP/1.1")
    func tooLargeWhileVerified() async throws {
        let configuration = Self.configuration()
        let padded: [UInt8] = Array(repeating: UInt8(ascii: " "), count: 4100) + Self.alert
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let h2 = try await RawStream.run(port: Self.port(system.pushServiceHTTP2!), [(.zero, HTTP2Wire.preface + Self.push(1, body: padded).now)], wait: .seconds(60)) { bytes in
                HTTP2Wire.frames(bytes).contains { $0.type <= 1 && $0.stream == 1 && $0.flags & 0x1 != 0 }
            }
            #expect(HTTP2Wire.statuses(h2.bytes) == [1: "413"])
            let body = String(decoding: HTTP2Wire.frames(h2.bytes).filter { $0.type == 0 && $0.stream == 1 }.flatMap(\.payload), as: UTF8.self)
            #expect(body.contains("PayloadTooLarge"), "\(body)")
            let head = "POST /3/device/\(Self.token) HTTP/1.1\r\nhost: api.push.apple.com\r\nauthorization: \(TestCredentials.apnsAuthorization)\r\n"
                + "apns-topic: com.example.app\r\ncontent-length: \(padded.count)\r\n\r\n"
            let h1 = try await RawStream.run(port: Self.port(system.pushService), [(.zero, Array(head.utf8) + padded)], wait: .seconds(60)) { bytes in
                String(decoding: bytes, as: UTF8.self).contains("}")
            }
            #expect(h1.text.hasPrefix("HTTP/1.1 413"), "\(h1.text)")
            #expect(h1.text.contains("PayloadTooLarge"), "\(h1.text)")
        }
    }

    /// NIO's own header validation is off on the push service's HTTP/2 connections; its rules
    /// hold all the same, for provider streams and the router's alike.
    @Test("malformed request blocks and trailers, on provider and router paths, over h2c: each stream reset with PROTOCOL_ERROR, the connection's next push answered")
    func malformedBlocksReset() async throws {
        let token = [("authorization", TestCredentials.apnsAuthorization), ("apns-topic", "com.example.app")]
        let push = "/3/device/\(Self.token)"
        func block(_ stream: UInt32, _ fields: [(String, String)], end: Bool) -> [UInt8] {
            HTTP2HeaderBlockRulesTests.headersFrame(stream: stream, fields, endStream: end)
        }
        let base = [(":method", "POST"), (":scheme", "http"), (":authority", "api.push.apple.com")]
        let hostile: [UInt8] = block(1, base + [(":path", push), ("Upper-Case", "x")] + token, end: true)
            + block(3, base + [(":path", push), ("connection", "keep-alive")] + token, end: true)
            + block(5, [(":method", "GET"), (":scheme", "http"), (":path", "/health"), (":path", "/health")], end: true)
            + block(7, [(":method", "GET"), (":scheme", "http"), (":path", "/a b")], end: true)
            + block(9, base + [(":path", push)] + token, end: false) + block(9, [(":status", "200")], end: true)
            + block(11, [(":method", "GET"), (":scheme", "http"), (":path", "/health"), ("te", "gzip")], end: true)
        let good = Self.push(13, body: Self.alert).now
        let resets: Set<UInt32> = [1, 3, 5, 7, 9, 11]
        try await TestSystem.run(Self.configuration()) { (system: TestSystem) async throws in
            let outcome = try await RawStream.run(port: Self.port(system.pushServiceHTTP2!), [(.zero, HTTP2Wire.preface + hostile), (.milliseconds(200), good)], wait: .seconds(60)) { bytes in
                HTTP2Wire.frames(bytes).contains { $0.type <= 1 && $0.stream == 13 && $0.flags & 0x1 != 0 }
            }
            let frames = HTTP2Wire.frames(outcome.bytes)
            for stream in resets.sorted() {
                let reset = frames.first { $0.type == 3 && $0.stream == stream }
                #expect(reset?.payload == [0, 0, 0, 1], "stream \(stream): \(frames.filter { $0.stream == stream })")
                #expect(!frames.contains { $0.type <= 1 && $0.stream == stream }, "stream \(stream) answered")
            }
            #expect(!frames.contains { $0.type == HTTP2Wire.goAwayType }, "the connection goes on")
            #expect(HTTP2Wire.statuses(outcome.bytes) == [13: "200"])
            #expect(try await system.pushStats().accepted == 1)
        }
    }
}
