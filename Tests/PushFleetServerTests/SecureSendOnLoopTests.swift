import Foundation
import HTTPTypes
import NIOCore
import NIOPosix
import PushFleetEmbedded
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

@testable import PushFleetBackend

/// The secure send answered from the event loop (``ReferenceBackend/secureSendLater(head:body:on:)``):
/// what it leaves to the router, its answers in request order on a kept-alive connection, and a
/// first attempt made on the loop that goes on to retries.
@Suite("Secure send on the event loop")
struct SecureSendOnLoopTests {
    static let loop = MultiThreadedEventLoopGroup.singleton.next()

    static func head(_ query: String = "?to_tag=bob", authorization: String? = BackendRoutesTests.basic("alice")) -> HTTPRequest {
        var head = HTTPRequest(method: .post, scheme: nil, authority: "x", path: "/api/notifications/secure" + query)
        if let authorization { head.headerFields[.authorization] = authorization }
        return head
    }

    @Test("the route takes the secure send alone, with or without a query")
    func route() {
        #expect(BackendRoutes.isSecureSend(Self.head()))
        #expect(BackendRoutes.isSecureSend(Self.head("")))
        #expect(!BackendRoutes.isSecureSend(Self.head("x")))
        #expect(!BackendRoutes.isSecureSend(Self.head("/extra")))
        var get = Self.head()
        get.method = .get
        #expect(!BackendRoutes.isSecureSend(get))
    }

    @Test("what the router refuses or must wait for goes to it; a user with no device is told so here, and nothing is stored")
    func leavesTheRestToTheRouter() async throws {
        try await BackendRoutesTests.withBackend { backend, store in
            let body = ByteBuffer(string: #""the payload""#)
            #expect(backend.secureSendLater(head: Self.head(), body: ByteBuffer(string: "not json"), on: Self.loop) == nil)
            #expect(backend.secureSendLater(head: Self.head(), body: ByteBuffer(string: "{\"a\":1}"), on: Self.loop) == nil)
            #expect(backend.secureSendLater(head: Self.head(authorization: nil), body: body, on: Self.loop) == nil)
            #expect(backend.secureSendLater(head: Self.head(authorization: "Basic " + Data("alice:wrong".utf8).base64EncodedString()), body: body, on: Self.loop) == nil)
            #expect(backend.secureSendLater(head: Self.head("?to_tag=" + String(repeating: "b", count: 300)), body: body, on: Self.loop) == nil)
            let tooLarge = ByteBuffer(string: "\"" + String(repeating: "x", count: backend.configuration.limits.maxBodyBytes) + "\"")
            #expect(backend.secureSendLater(head: Self.head(), body: tooLarge, on: Self.loop) == nil)
            backend.configuration.faults.replace(with: BackendLatency(fetch: .fixed(ms: 5)))
            #expect(backend.secureSendLater(head: Self.head(), body: body, on: Self.loop) == nil)
            backend.configuration.faults.replace(with: BackendLatency())

            let answer = try await #require(backend.secureSendLater(head: Self.head(), body: body, on: Self.loop)).get()
            #expect(answer.status == .ok)
            let outcome = try JSONDecoder().decode(SendOutcome.self, from: Data(answer.body.readableBytesView))
            #expect(outcome.outcome == .noTargetFound && outcome.id == nil)
            #expect(store.counts().notifications == 0)
        }
    }

    @Test("secure sends pipelined on one connection are answered in order, each once its push is accepted, around a router request")
    func pipelined() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let phone = try await system.device("bob", .apns)
            let port = Int(system.backend.split(separator: ":").last!)!
            let auth = BackendRoutesTests.basic("alice")
            func secure(_ payload: String, _ extra: String = "") -> String {
                let body = "\"\(payload)\""
                return "POST /api/notifications/secure?to_tag=bob HTTP/1.1\r\nHost: x\r\nAuthorization: \(auth)\r\n"
                    + "Content-Type: application/json\r\n\(extra)Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
            }
            let health = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
            let exchange = try await RawSocket.exchange(
                port: port, secure("one") + health + secure("two") + secure("three", "Connection: close\r\n"), waitFor: .seconds(30)
            )
            let answers = exchange.response.components(separatedBy: "HTTP/1.1 ").dropFirst()
            #expect(answers.map { $0.prefix(3) } == ["200", "200", "200", "200"], "\(exchange.response)")
            #expect(exchange.closed, "Connection: close left the connection open")
            let ids = answers.compactMap { answer -> String? in
                guard let json = answer.range(of: "\r\n\r\n").map({ answer[$0.upperBound...] }), json.hasPrefix("{") else { return nil }
                return (try? JSONDecoder().decode(SendOutcome.self, from: Data(json.utf8)))?.id
            }
            #expect(ids.count == 3)
            let pushes = try await phone.waitForPushes(3)
            #expect(pushes.map { $0.json["secureId"] as? String } == ids)
            for (id, payload) in zip(ids, ["one", "two", "three"]) {
                #expect(try await system.fetch(id, as: "bob").json(SecureNotification.self).payload == payload)
            }
        }
    }

    @Test("a first attempt made on the loop that the push service throttles goes on to retries, and the send is abandoned after them")
    func retriesAfterTheLoop() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.pushBackoff = .milliseconds(1)
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            _ = try await system.device("bob", .apns)
            // The first send resolves the push service's URL and token and leaves a connection idle.
            #expect(try await system.sendSecure(from: "alice", to: "bob", payload: "warm").status == 200)
            let before = try await system.backendStats()
            try await system.setFaults(FaultSettings(throttle: 1))
            let send = try await system.sendSecure(from: "alice", to: "bob", payload: "hello")
            #expect(send.status == 500)
            #expect(try send.json(SendOutcome.self).outcome == .abandoned)
            let stats = try await system.backendStats()
            #expect(stats.pnsRequests - before.pnsRequests == 4 && stats.pnsRetried - before.pnsRetried == 3 && stats.pnsFailed - before.pnsFailed == 1)
        }
    }
}
