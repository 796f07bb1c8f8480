import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import PushFleetEmbedded
import PushFleetServerSupport
import PushFleetTestSupport
import Testing

/// Requests answered on the event loop: the order rules without a channel, then the push port
/// with provider requests and router requests mixed on one connection.
@Suite("Requests answered on the event loop")
struct EventLoopRoutesTests {
    static let provider = HTTPRequest(method: .post, scheme: nil, authority: "x", path: "/3/device/ab")
    static let other = HTTPRequest(method: .get, scheme: nil, authority: "x", path: "/health")
    static func limit(_ head: HTTPRequest) -> Int? { head.path == "/3/device/ab" ? 8 : nil }

    @Test("a provider request is held to its end and answered; others go to the router")
    func holdAndAnswer() {
        var state = EventLoopRoutesState()
        #expect(state.head(Self.provider, bodyLimit: Self.limit) == .hold)
        #expect(state.body(ByteBuffer(string: "{\"a\":")) == .hold)
        #expect(state.body(ByteBuffer(string: "1}")) == .hold)
        #expect(state.end() == .answer(head: Self.provider, body: ByteBuffer(string: "{\"a\":1}")))
        #expect(state.head(Self.other, bodyLimit: Self.limit) == .forward)
        #expect(state.end() == .forward)
        #expect(state.forwarded == 1)
    }

    @Test("a body past its limit is answered without it (nil), however it arrives")
    func tooLarge() {
        var state = EventLoopRoutesState()
        _ = state.head(Self.provider, bodyLimit: Self.limit)
        #expect(state.body(ByteBuffer(string: "12345")) == .hold)
        #expect(state.body(ByteBuffer(string: "6789")) == .hold)
        #expect(state.body(ByteBuffer(string: "0")) == .hold)
        #expect(state.end() == .answer(head: Self.provider, body: nil))
        // Kept for the router, should the request go there: the limit and one byte more.
        #expect(state.lastBody == ByteBuffer(string: "123456789"))
        _ = state.head(Self.provider, bodyLimit: Self.limit)
        #expect(state.end() == .answer(head: Self.provider, body: ByteBuffer()))
        #expect(state.lastBody == nil)
    }

    @Test("while the router owes an answer, provider requests go to it too, in order; afterwards they are answered here again")
    func order() {
        var state = EventLoopRoutesState()
        #expect(state.head(Self.other, bodyLimit: Self.limit) == .forward)
        #expect(state.end() == .forward)
        #expect(state.head(Self.provider, bodyLimit: Self.limit) == .forward)
        #expect(state.body(ByteBuffer(string: "{}")) == .forward)
        #expect(state.end() == .forward)
        #expect(state.forwarded == 2)
        state.routerAnswerEnded()
        state.routerAnswerEnded()
        #expect(state.head(Self.provider, bodyLimit: Self.limit) == .hold)
        #expect(state.end() == .answer(head: Self.provider, body: ByteBuffer()))
        // Handed to the router after all (a token to verify): the next request follows it there.
        state.handedOver()
        #expect(state.head(Self.provider, bodyLimit: Self.limit) == .forward)
    }

    @Test("an answer owed later holds the parts after it, and the next read once one waits; they come back in order")
    func answeredLater() {
        var state = EventLoopRoutesState()
        _ = state.head(Self.provider, bodyLimit: Self.limit)
        #expect(state.end() == .answer(head: Self.provider, body: ByteBuffer()))
        state.answersLater()
        // A client that waits for its answer sends nothing meanwhile: reading goes on.
        let readFirst = state.read()
        #expect(readFirst)
        let next: [HTTPRequestPart] = [.head(Self.other), .end(nil), .head(Self.provider)]
        for part in next {
            let waits = state.waits(part)
            #expect(waits)
        }
        let readNow = state.read()
        #expect(!readNow)
        let resumed = state.answeredLater()
        #expect(resumed.parts == next && resumed.read)
        let waitsAfter = state.waits(.head(Self.other))
        #expect(!waitsAfter && !state.answeringLater)
        let readAfter = state.read()
        #expect(readAfter)
        let again = state.answeredLater()
        #expect(again.parts.isEmpty && !again.read)
    }

    @Test("on one kept-alive connection, pipelined provider and router requests are answered in order, and Connection: close closes")
    func pipelined() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let port = Int(system.pushService.split(separator: ":").last!)!
            let token = String(repeating: "ab", count: 32)
            func apns(_ extra: String = "") -> String {
                let body = #"{"aps":{"alert":"x"}}"#
                return "POST /3/device/\(token) HTTP/1.1\r\nHost: x\r\napns-topic: t\r\n\(extra)Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
            }
            let health = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
            // No provider token: each APNs request is answered 403 MissingProviderToken, here.
            let exchange = try await RawSocket.exchange(
                port: port, apns() + health + apns() + apns("Connection: close\r\n"), waitFor: .seconds(30)
            )
            let statuses = exchange.response.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
            #expect(statuses == ["403", "200", "403", "403"], "\(exchange.response)")
            #expect(exchange.response.components(separatedBy: "MissingProviderToken").count == 4)
            #expect(exchange.closed, "Connection: close left the connection open")
        }
    }
}
