import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Requests whose bytes span reads on the push port's HTTP/1.1 fast path: a client that writes a
/// head and its body apart (AsyncHTTPClient does) stays at the fast path; one that trickles or
/// stalls past the grace goes to the full pipeline and its timeouts. Told apart from outside by
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

    @Test("a head and its body in two reads are answered here; a body later than the grace, or trickled, goes behind")
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

            // The body well past the grace (a loaded machine fires the grace's timer late): the
            // pipeline behind answers it, and what follows.
            let late = try await RawSocket.exchange(
                port: port, [(.zero, Array(request[..<cut])), (.seconds(3), Array(request[cut...]) + Self.apns(closing: true))],
                waitFor: .seconds(60)
            )
            let lateAnswers = Self.answers(late)
            #expect(lateAnswers.map(\.status) == ["403", "403"], "\(late.response)")
            let noneFast = lateAnswers.allSatisfy { !$0.fast }
            #expect(noneFast, "a body later than the grace was answered here: \(late.response)")

            // After an answer here, a request trickled a byte at a time, past the reads allowed and
            // the grace (a loaded machine may read several bytes at once): handed over, answered alike.
            let closing = Self.apns(closing: true)
            let closingCut = closing.count - Self.body.utf8.count
            let trickle = try await RawSocket.exchange(
                port: port,
                [(.zero, request + Array(closing[..<closingCut]))] + Self.body.utf8.map { (.milliseconds(150), [$0]) },
                waitFor: .seconds(60)
            )
            let trickleAnswers = Self.answers(trickle)
            #expect(trickleAnswers.map(\.status) == ["403", "403"], "\(trickle.response)")
            #expect(trickleAnswers.map(\.fast) == [true, false], "\(trickle.response)")
            #expect(trickle.closed)
        }
    }

    @Test("the servers stop while a request is in pieces at the fast path: it is answered behind, then the connection closes")
    func stopWithRequestInPieces() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushServer.limits = ServerLimits(headerTimeout: .seconds(20), bodyTimeout: .seconds(20))
        let request = Self.apns()
        let cut = request.count - 5
        let fd = try await EmbeddedSystem.withRunning(configuration, logger: Logger(label: "pieces"), shutdownWithin: .seconds(60)) { _, endpoints in
            let fd = try RawSocket.openIdle(port: Int(endpoints.pushService.split(separator: ":").last!)!)
            _ = request[..<cut].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            // The rest comes once the stop has begun, within the grace.
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: 0.4)
                _ = request[cut...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            // Time for the server to read the head before the stop.
            try await Task.sleep(for: .milliseconds(200))
            return fd
        }
        defer { RawSocket.closeIdle(fd) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var count = read(fd, &buffer, buffer.count)
        while count > 0 {
            response += buffer[0..<count]
            count = read(fd, &buffer, buffer.count)
        }
        let text = String(decoding: response, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 403"), "the request in pieces was dropped at the stop: \(text)")
        #expect(count == 0, "the connection was left open after its answer")
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
