import Crypto
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetTestSupport
import Testing

@Suite("HTTP/2 answers end their stream on their last frame")
struct StreamEndTests {
    typealias Payload = HTTP2Frame.FramePayload

    static func head(_ status: String = "200") -> Payload { .headers(.init(headers: [":status": status])) }
    static func data(_ text: String, end: Bool = false) -> Payload { .data(.init(data: .byteBuffer(ByteBuffer(string: text)), endStream: end)) }

    /// A frame as (kind, body, END_STREAM), and the tokens it completes.
    static func shape(_ sent: [(payload: Payload, token: [Int])]) -> [String] {
        sent.map { payload, tokens in
            switch payload {
            case .headers(let headers): "HEADERS \(headers.headers.first(name: ":status") ?? "") end=\(headers.endStream) \(tokens)"
            case .data(let data):
                if case .byteBuffer(let buffer) = data.data {
                    "DATA '\(String(buffer: buffer))' end=\(data.endStream) \(tokens)"
                } else {
                    "DATA file end=\(data.endStream) \(tokens)"
                }
            default: "other \(tokens)"
            }
        }
    }

    static func run(_ steps: [Payload?]) -> [String] {
        var fold = StreamEndFold<[Int]>(combine: +)
        var sent: [(payload: Payload, token: [Int])] = []
        for (index, step) in steps.enumerated() {
            if let step {
                let sends = fold.write(step, [index])
                sent += [sends.first, sends.second].compactMap { $0 }
            } else if let held = fold.flush() {
                sent.append(held)
            }
        }
        return shape(sent)
    }

    @Test("the codec's empty end is folded into the head or into the body's last chunk; empty chunks vanish")
    func folds() {
        #expect(Self.run([Self.head(), Self.data("", end: true), nil]) == ["HEADERS 200 end=true [0, 1]"])
        #expect(
            Self.run([Self.head("400"), Self.data(#"{"reason":"BadDeviceToken"}"#), Self.data("", end: true), nil])
                == ["HEADERS 400 end=false [0]", #"DATA '{"reason":"BadDeviceToken"}' end=true [1, 2]"#]
        )
        // Hummingbird writes an empty body as an empty chunk before the end.
        #expect(Self.run([Self.head(), Self.data(""), Self.data("", end: true), nil]) == ["HEADERS 200 end=true [0, 1, 2]"])
        #expect(
            Self.run([Self.head(), Self.data("a"), Self.data(""), Self.data("b"), Self.data("", end: true)])
                == ["HEADERS 200 end=false [0]", "DATA 'a' end=false [1, 2]", "DATA 'b' end=true [3, 4]"]
        )
    }

    @Test("a flush sends what is held, so a streamed answer's chunks are not held back; 1xx heads pass at once")
    func flushes() {
        #expect(
            Self.run([Self.head(), nil, Self.data("a"), nil, Self.data("", end: true)])
                == ["HEADERS 200 end=false [0]", "DATA 'a' end=false [2]", "DATA '' end=true [4]"]
        )
        #expect(Self.run([Self.head("100"), Self.head(), Self.data("", end: true)]) == ["HEADERS 100 end=false [0]", "HEADERS 200 end=true [1, 2]"])
        var fold = StreamEndFold<[Int]>(combine: +)
        _ = fold.write(Self.head(), [7])
        #expect(fold.drop() == [7])
        #expect(fold.flush() == nil)
    }

    /// An APNs push per stream on one connection: the first token of a connection is verified off
    /// the event loop (the router's path), later ones on it; a bad device token is refused with a
    /// JSON body. Every stream's answer must end on its last frame, with no empty DATA frame.
    static func pushes(_ authorization: String) -> [UInt8] {
        let good = String(repeating: "ab", count: 32)
        let requests: [(UInt32, String)] = [(1, good), (3, good), (5, "nothex"), (7, good)]
        return HTTP2Wire.preface + requests.flatMap { stream, token in
            HTTP2Wire.headers(
                stream: stream, path: "/3/device/\(token)",
                extra: [("authorization", authorization), ("apns-topic", "com.example.app"), ("apns-push-type", "alert")], endStream: false
            ) + HTTP2Wire.data(stream: stream, Array(#"{"aps":{"alert":"x"}}"#.utf8), endStream: true)
        }
    }

    static let streams: Set<UInt32> = [1, 3, 5, 7]

    static func ended(_ bytes: [UInt8]) -> Bool {
        Set(HTTP2Wire.frames(bytes).filter { $0.type <= 1 && $0.flags & 0x1 != 0 }.map(\.stream)).isSuperset(of: streams)
    }

    static func expectFolded(_ outcome: RawStream.Outcome, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let frames = HTTP2Wire.frames(outcome.bytes).filter { $0.type <= 1 && streams.contains($0.stream) }
        for stream in streams.sorted() {
            let mine = frames.filter { $0.stream == stream }
            let summary = mine.map { "\($0.type == 0 ? "DATA" : "HEADERS")(\($0.payload.count)) flags \($0.flags)" }
            #expect(mine.last.map { $0.flags & 0x1 != 0 } == true, "\(what) stream \(stream): \(summary)", sourceLocation: sourceLocation)
            #expect(!mine.contains { $0.type == 0 && $0.payload.isEmpty }, "\(what) stream \(stream): \(summary)", sourceLocation: sourceLocation)
        }
        let statuses = HTTP2Wire.statuses(outcome.bytes)
        #expect(statuses == [1: "200", 3: "200", 5: "400", 7: "200"], "\(what): \(statuses)", sourceLocation: sourceLocation)
    }

    @Test("APNs answers over h2c and TLS h2, accepted and refused, on both request paths: no empty DATA frame, END_STREAM last")
    func apnsAnswers() async throws {
        let keys = [ProviderAuthConfiguration.APNsKey(
            keyID: TestCredentials.apnsKeyID, teamID: TestCredentials.apnsTeamID, publicKeyPEM: TestCredentials.apnsKey.publicKey.pemRepresentation
        )]
        let auth = ProviderAuthConfiguration(apnsKeys: keys, apnsTopics: ["com.example.app"])
        let parts = [(delay: Duration.zero, bytes: Self.pushes(TestCredentials.apnsAuthorization))]
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushService.providerAuth = auth
        configuration.pushServer.http2Listen = .init(host: "127.0.0.1", port: 0)
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let port = Int(system.pushServiceHTTP2!.split(separator: ":").last!)!
            let outcome = try await RawStream.run(port: port, parts, wait: .seconds(60), until: Self.ended)
            Self.expectFolded(outcome, "h2c")
        }
        try await TLSTestSystem.run(providerAuth: auth) { (tls: TLSTestSystem) async throws in
            let client = RawStream.TLS(configuration: try tls.clientTLS(), serverName: "api.push.apple.com", alpn: ["h2"])
            let outcome = try await RawStream.run(port: tls.port, tls: client, parts, wait: .seconds(60), until: Self.ended)
            Self.expectFolded(outcome, "TLS h2")
        }
    }
}
