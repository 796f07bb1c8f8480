import Foundation
import PushFleetBackend
import PushFleetEmbedded
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

/// The backend's port read from the bytes (``HTTP1FastPath`` with lending): an answer owed, a
/// request lent to Hummingbird's pipeline and the connection taken back, the idle timeout kept
/// across both, with an injected clock; and the real backend answering a connection that mixes
/// its fast routes with the router's.
@Suite("The backend's HTTP/1.1 fast path")
struct BackendFastPathTests {
    let second: Int64 = 1_000_000_000

    @Test("an answer owed holds the connection and the idle timeout; the stop waits for it")
    func owing() {
        var state = HTTP1FastPathState(idleTimeout: .seconds(10))
        _ = state.bytesArrived(now: 0)
        _ = state.firstBytes(now: 0)
        state.owe()
        #expect(state.mode == .owing)
        #expect(state.readEnded(holdingPartialRequest: true, now: 1) == .none, "a request waiting behind an owed answer is not handed over")
        #expect(state.idleTimerFired(now: 30 * second) == .armIdleTimer(at: 40 * second))
        #expect(state.owedAnswerWritten(now: 31 * second) == .resume)
        #expect(state.mode == .answering)
        #expect(state.idleTimerFired(now: 40 * second) == .armIdleTimer(at: 41 * second))
        #expect(state.idleTimerFired(now: 41 * second) == .close)

        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        state.owe()
        #expect(state.quiesce() == .none)
        #expect(state.closing)
        #expect(state.owedAnswerWritten(now: 1) == .close)
        #expect(state.mode == .closed)

        // The client's half-close waits for every answer owed, then goes on once.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        #expect(state.inputEnded() == true, "between requests it goes on at once")
        state.owe()
        #expect(state.inputEnded() == false)
        #expect(state.releaseInputEnd() == false, "not while the answer is owed")
        #expect(state.owedAnswerWritten(now: 1) == .resume)
        state.owe()
        #expect(state.releaseInputEnd() == false, "a request that waited owes an answer in turn")
        #expect(state.owedAnswerWritten(now: 2) == .resume)
        #expect(state.releaseInputEnd() == true)
        #expect(state.releaseInputEnd() == false, "once")

        // Closed meanwhile: nothing goes on.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        state.owe()
        #expect(state.inputEnded() == false)
        state.closed()
        #expect(state.releaseInputEnd() == false)
    }

    @Test("a lent request: its body goes behind as it comes, the connection comes back after both it and the answer")
    func lending() {
        var state = HTTP1FastPathState(idleTimeout: .seconds(10))
        _ = state.bytesArrived(now: 0)
        _ = state.firstBytes(now: 0)
        // 100 bytes, 40 of them read so far.
        state.lend(length: 100, forwarded: 40)
        #expect(state.lentRemaining == 60)
        #expect(state.readEnded(holdingPartialRequest: false, now: 1) == .none)
        #expect(state.forwarded(50, now: 1) == .none)
        #expect(state.lentRemaining == 10)
        // The pipeline refused it before its body ended: it still reads the rest.
        #expect(state.innerAnswered(now: 2) == .none)
        #expect(state.idleTimerFired(now: 60 * second) == .armIdleTimer(at: 70 * second))
        #expect(state.forwarded(10, now: 3 * second) == .resume)
        #expect(state.mode == .answering && state.lentRemaining == 0)
        #expect(state.resumedIdle() == .quietBegan)
        #expect(state.resumedIdle() == .none)
        #expect(state.idleTimerFired(now: 13 * second) == .close)

        // Whole at once, answered later.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        state.lend(length: 30, forwarded: 30)
        #expect(state.forwarded(0, now: 0) == .none)
        #expect(state.innerAnswered(now: 5) == .resume)
        #expect(state.innerAnswered(now: 6) == .none, "an answer's end with nothing lent is not the lent one's")

        // The stop while lent goes behind, which closes after its answer.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        state.lend(length: 30, forwarded: 30)
        #expect(state.quiesce() == .passQuiesce)
        #expect(state.innerAnswered(now: 1) == .none)
        #expect(state.mode == .closed)

        // Framing it cannot read still hands over for good, once, only between requests.
        state = HTTP1FastPathState(idleTimeout: .seconds(10))
        state.lend(length: 30, forwarded: 30)
        #expect(state.handOver() == .none)
        #expect(state.innerAnswered(now: 1) == .resume)
        #expect(state.handOver() == .handOver)
        #expect(state.idleTimerFired(now: 100 * second) == .none)
    }

    static let auth = BackendRoutesTests.basic("bob")

    static func request(_ method: String, _ path: String, body: String? = nil, extra: String = "") -> String {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: \(auth)\r\n\(extra)"
        if let body { text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        return text + "\r\n" + (body ?? "")
    }

    static func statuses(_ exchange: RawSocket.Exchange) -> [Substring] {
        exchange.response.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
    }

    @Test("one connection mixes fetches answered from the bytes with the router's requests, in order, pipelined and not")
    func mixed() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            _ = try await system.device("bob", .apns)
            let sent = try await system.sendSecure(from: "alice", to: "bob", payload: "fast")
            let id = try #require(try sent.json(SendOutcome.self).id)
            let port = Int(system.backend.split(separator: ":").last!)!
            let fetch = Self.request("GET", "/api/notifications/\(id)")
            let login = Self.request("POST", "/api/login")
            let register = Self.request("POST", "/api/register")
            let unknown = Self.request("GET", "/api/notifications/no-such-id")
            let health = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
            let last = Self.request("GET", "/api/notifications/\(id)", extra: "Connection: close\r\n")
            // In one write: the router's requests lent one at a time, the fetches answered here
            // around them (an unknown id is the router's 404).
            let together = try await RawSocket.exchange(
                port: port, fetch + login + fetch + register + unknown + fetch + health + fetch + last, waitFor: .seconds(60)
            )
            #expect(Self.statuses(together) == ["200", "200", "200", "200", "404", "200", "200", "200", "200"], "\(together.response)")
            #expect(together.response.components(separatedBy: "\"Payload\":\"fast\"").count == 6)
            #expect(together.response.contains("\"token\""))
            #expect(together.closed)

            // Each request in a write of its own, some in pieces: the head and body of a lent
            // register split, a fetch's head cut in two.
            let update = Self.request("PUT", "/api/register/no-such-registration", body: #"{"Platform":"apns","Handle":"ab"}"#)
            let cut = update.index(update.endIndex, offsetBy: -10)
            let fetchCut = fetch.index(fetch.startIndex, offsetBy: 20)
            let parts: [(delay: Duration, bytes: [UInt8])] = [
                (.zero, Array(login.utf8)),
                (.milliseconds(100), Array(fetch.utf8)),
                (.milliseconds(100), Array(update[..<cut].utf8)),
                (.milliseconds(100), Array(update[cut...].utf8)),
                (.milliseconds(100), Array(fetch[..<fetchCut].utf8)),
                (.milliseconds(100), Array(fetch[fetchCut...].utf8)),
                (.milliseconds(100), Array(health.utf8)),
                (.milliseconds(100), Array(last.utf8)),
            ]
            let apart = try await RawSocket.exchange(port: port, parts, waitFor: .seconds(60))
            #expect(Self.statuses(apart) == ["200", "200", "410", "200", "200", "200"], "\(apart.response)")
            #expect(apart.closed)

            // A request it cannot frame waiting behind a lent one: handed over once the lent one
            // is answered, and the connection goes on reading (the read that waited is made).
            let chunked = Self.request("POST", "/api/login", extra: "Transfer-Encoding: chunked\r\n") + "0\r\n\r\n"
            let behind = try await RawSocket.exchange(
                port: port, [(.zero, Array((login + chunked).utf8)), (.milliseconds(300), Array(last.utf8))], waitFor: .seconds(60)
            )
            #expect(Self.statuses(behind) == ["200", "200", "200"], "\(behind.response)")
            #expect(behind.closed)
            // The same with everything in one write: what is handed over after a lent answer,
            // outside any read, reaches the router (its read is ended for it).
            let together2 = try await RawSocket.exchange(port: port, login + chunked + last, waitFor: .seconds(60))
            #expect(Self.statuses(together2) == ["200", "200", "200"], "\(together2.response)")
            #expect(together2.closed)
        }
    }

    /// The connection reads on while a secure send's answer is owed, so a client's half-close can
    /// arrive before it: the pipeline behind, which has no request of its own, must not close first.
    @Test("a client that half-closes after a secure send gets its answer, and the requests it pipelined theirs, in order, then the close")
    func halfCloseWhileOwed() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            _ = try await system.device("bob", .apns)
            let port = Int(system.backend.split(separator: ":").last!)!
            let send = Self.request("POST", "/api/notifications/secure?to_tag=bob", body: "\"half\"")
            let health = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
            let cases: [(what: String, parts: [(delay: Duration, bytes: [UInt8])], statuses: [Substring])] = [
                ("a send alone", [(.zero, Array(send.utf8))], ["200"]),
                ("a send, then a send and a router request in the same write", [(.zero, Array((send + send + health).utf8))], ["200", "200", "200"]),
                ("a send, a router request after it", [(.zero, Array(send.utf8)), (.milliseconds(1), Array(health.utf8))], ["200", "200"]),
            ]
            for (what, parts, statuses) in cases {
                let exchange = try await RawSocket.exchange(port: port, parts, endingInput: true, waitFor: .seconds(60))
                #expect(Self.statuses(exchange) == statuses, "\(what): \(exchange.response)")
                #expect(exchange.closed, "\(what)")
            }
        }
    }

    @Test("hostile requests behind lent ones meet the router pipeline's guards: a declared body over the cap 413, a body that stalls 408, garbage 400")
    func hostileBehindLent() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.server = ServerLimits(idleTimeout: .seconds(60), headerTimeout: .seconds(30), bodyTimeout: .seconds(2))
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let port = Int(system.backend.split(separator: ":").last!)!
            let login = Self.request("POST", "/api/login")
            let register = "PUT /api/register/x HTTP/1.1\r\nHost: x\r\nAuthorization: \(Self.auth)\r\n"
            let behind: [(what: String, bytes: String, statuses: [Substring])] = [
                ("a declared body over the cap", register + "Content-Length: 999999999\r\n\r\n{", ["200", "413"]),
                ("a body that stalls", register + "Content-Length: 50\r\n\r\n{\"Plat", ["200", "408"]),
                ("garbage", "\u{01}\u{02} nonsense\r\n\r\n", ["200", "400"]),
            ]
            for (what, bytes, statuses) in behind {
                let outcome = try await RawSocket.exchange(port: port, login + bytes, waitFor: .seconds(30))
                #expect(Self.statuses(outcome) == statuses, "\(what): \(outcome.response)")
                #expect(outcome.closed, "\(what)")
            }
        }
    }

    /// The idle timeout is the fast path's while it has the connection: the router's pipeline,
    /// which sees only the requests lent to it, must not close a connection busy with fetches.
    @Test("a connection busy with fetches after a lent request outlives the idle timeout, then closes when quiet")
    func idleAcrossLending() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.server = ServerLimits(idleTimeout: .seconds(6), headerTimeout: .seconds(30), bodyTimeout: .seconds(30))
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            // The setup's pooled connections may meet the idle timeout on a loaded machine.
            _ = try await againOnReset { try await system.device("bob", .apns) }
            let sent = try await againOnReset { try await system.sendSecure(from: "alice", to: "bob", payload: "kept") }
            let id = try #require(try sent.json(SendOutcome.self).id)
            let port = Int(system.backend.split(separator: ":").last!)!
            let fetch = Array(Self.request("GET", "/api/notifications/\(id)").utf8)
            // A lent login, then a fetch every 1.5 s for 7.5 s (each gap 4.5 s inside the idle
            // timeout, however loaded the machine); then nothing, for up to 60 s.
            var parts: [(delay: Duration, bytes: [UInt8])] = [(.zero, Array(Self.request("POST", "/api/login").utf8))]
            for _ in 0..<5 { parts.append((.milliseconds(1500), fetch)) }
            let exchange = try await RawSocket.exchange(port: port, parts, waitFor: .seconds(60))
            #expect(Self.statuses(exchange) == ["200", "200", "200", "200", "200", "200"], "\(exchange.response)")
            #expect(exchange.closed, "a quiet connection was left open past the idle timeout")

            // Handed over for good (a chunked body the bytes' reader leaves to NIO's parser): the
            // router's pipeline has the idle timeout from then on.
            let chunked = Self.request("POST", "/api/login", extra: "Transfer-Encoding: chunked\r\n") + "0\r\n\r\n"
            let handedOver = try await RawSocket.exchange(port: port, [(.zero, fetch + Array(chunked.utf8))], waitFor: .seconds(60))
            #expect(Self.statuses(handedOver) == ["200", "200"], "\(handedOver.response)")
            #expect(handedOver.closed, "a connection handed over was left open past the idle timeout")
        }
    }
}
