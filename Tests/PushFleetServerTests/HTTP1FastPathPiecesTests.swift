import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

/// Requests whose bytes span reads on the push port's HTTP/1.1 fast path: a client that writes a
/// head and its body apart (AsyncHTTPClient does) stays at the fast path; one that trickles or
/// stalls is answered alike, at the fast path or, past its grace, by the full pipeline. Told apart from outside by
/// what each writes: the fast path names its length `content-length`, NIO's encoder behind it
/// `Content-Length`.
@Suite("The HTTP/1.1 fast path: requests in pieces")
struct HTTP1FastPathPiecesTests {
    static let token = String(repeating: "ab", count: 32)
    static let body = #"{"aps":{"alert":"x"}}"#

    static func apns(closing: Bool = false) -> [UInt8] {
        Array(
            ("POST /3/device/\(token) HTTP/1.1\r\nHost: x\r\napns-topic: t\r\n" + (closing ? "Connection: close\r\n" : "")
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8
        )
    }

    /// Each answer's status, and whether the fast path wrote it.
    static func answers(_ exchange: RawSocket.Exchange) -> [(status: Substring, fast: Bool)] {
        exchange.response.components(separatedBy: "HTTP/1.1 ").dropFirst().map { ($0.prefix(3), $0.contains("\r\ncontent-length: ")) }
    }

    @Test("a head and its body in two reads are answered here; a body later than the grace, or trickled, is answered alike")
    func rawPieces() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let port = Int(system.pushService.split(separator: ":").last!)!
            let request = Self.apns()
            let cut = request.count - Self.body.utf8.count

            // The body 20 ms after its head, then a whole request that closes: both answered here.
            let quick = try await RawSocket.exchange(
                port: port, [(.zero, Array(request[..<cut])), (.milliseconds(20), Array(request[cut...]) + Self.apns(closing: true))],
                waitFor: .seconds(60)
            )
            let quickAnswers = Self.answers(quick)
            #expect(quickAnswers.map(\.status) == ["403", "403"], "\(quick.response)")
            let allFast = quickAnswers.allSatisfy { $0.fast }
            #expect(allFast, "a request in two quick pieces went behind: \(quick.response)")
            #expect(quick.closed)

            // The body well past the grace: answered whole, with what follows. Which side answers
            // it is timing (a loaded machine fires the grace's timer late, or reads the rest with
            // it at once); the bounds themselves are `HTTP1FastPathTests.partialHold`'s, on an
            // injected clock.
            let late = try await RawSocket.exchange(
                port: port, [(.zero, Array(request[..<cut])), (.seconds(3), Array(request[cut...]) + Self.apns(closing: true))],
                waitFor: .seconds(60)
            )
            let lateAnswers = Self.answers(late)
            #expect(lateAnswers.map(\.status) == ["403", "403"], "\(late.response)")

            // After an answer here, a request trickled a byte at a time: answered alike, and closed
            // as it asked.
            let closing = Self.apns(closing: true)
            let closingCut = closing.count - Self.body.utf8.count
            let trickle = try await RawSocket.exchange(
                port: port,
                [(.zero, request + Array(closing[..<closingCut]))] + Self.body.utf8.map { (.milliseconds(150), [$0]) },
                waitFor: .seconds(60)
            )
            let trickleAnswers = Self.answers(trickle)
            #expect(trickleAnswers.map(\.status) == ["403", "403"], "\(trickle.response)")
            #expect(trickleAnswers.first?.fast == true, "\(trickle.response)")
            #expect(trickle.closed)
        }
    }

    @Test("AsyncHTTPClient, which writes a reused connection's head and body apart: its pushes on one connection are all answered at the fast path, and delivered")
    func asyncHTTPClient() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .apns)
            var configuration = HTTPClient.Configuration()
            configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 1)
            configuration.httpVersion = .http1Only
            let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
            var statuses: [UInt] = []
            var lengthNames: Set<String> = []
            do {
                for number in 0..<5 {
                    var request = HTTPClientRequest(url: "\(system.pushService)/3/device/\(device.address!.token)")
                    request.method = .POST
                    request.headers.add(name: "authorization", value: TestCredentials.apnsAuthorization)
                    request.headers.add(name: "apns-topic", value: "com.example.app")
                    request.body = .bytes(ByteBuffer(string: #"{"aps":{"alert":"piece \#(number)"}}"#))
                    let response = try await client.execute(request, timeout: .seconds(30))
                    _ = try await response.body.collect(upTo: 1 << 20)
                    statuses.append(response.status.code)
                    lengthNames.formUnion(response.headers.map(\.name).filter { $0.lowercased() == "content-length" })
                }
            } catch {
                try await client.shutdown()
                throw error
            }
            try await client.shutdown()
            #expect(statuses == [200, 200, 200, 200, 200])
            #expect(lengthNames == ["content-length"], "answered behind the fast path: \(lengthNames)")
            let bodies = try await device.waitForPushes(5).map(\.body)
            #expect((0..<5).allSatisfy { number in bodies.contains { $0.contains("piece \(number)") } })
        }
    }
}
