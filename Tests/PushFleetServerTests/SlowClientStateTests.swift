import NIOEmbedded
@testable import PushFleetServerSupport
import Testing

/// The body, framing, ping and eviction rules without sockets, on integer times.
@Suite("Slow-client state machines")
struct SlowClientStateTests {
    static let second: Int64 = 1_000_000_000

    @Test("a body trickling under the minimum rate is refused one body timeout after its head, whatever its pauses")
    func minimumRate() {
        var state = BodyTimeoutState(bodyTimeout: .seconds(60), minRate: 1024, maxSize: 1 << 20)
        #expect(state.head(now: 0, declaredLength: 100_000) == .arm(at: 60 * Self.second))
        // A byte every 5 s: each moves the pause deadline, none the rate deadline by much.
        for tick in 1...11 { #expect(state.body(now: Int64(tick) * 5 * Self.second, bytes: 1) == TimerAction.none) }
        let due = 60 * Self.second + 11 * Self.second / 1024
        #expect(state.timerFired(now: 60 * Self.second) == .arm(at: due))
        #expect(state.timerFired(now: due) == .reject(status: 408))
        #expect(state.end() == TimerAction.none)

        // A large body at a good rate is never cut: each KiB buys a second.
        var fast = BodyTimeoutState(bodyTimeout: .seconds(1), minRate: 1024, maxSize: 1 << 30)
        _ = fast.head(now: 0)
        for tick in 1...100 { _ = fast.body(now: Int64(tick) * Self.second / 2, bytes: 2048) }
        #expect(fast.timerFired(now: 50 * Self.second) == .arm(at: 50 * Self.second + Self.second))
        #expect(fast.end() == .disarm)

        // Without a rate, pauses alone count, as before.
        var pauses = BodyTimeoutState(bodyTimeout: .seconds(1))
        #expect(pauses.head(now: 0) == .arm(at: Self.second))
        #expect(pauses.body(now: 600_000_000) == TimerAction.none)
        #expect(pauses.timerFired(now: Self.second) == .arm(at: 1_600_000_000))
        #expect(pauses.timerFired(now: 1_600_000_000) == .reject(status: 408))
    }

    @Test("a body over the cap is refused at its head when declared, else when it grows past it")
    func sizeCap() {
        var declared = BodyTimeoutState(bodyTimeout: .seconds(1), minRate: 1, maxSize: 1000)
        #expect(declared.head(now: 0, declaredLength: 1 << 62) == .reject(status: 413))
        #expect(declared.body(now: 1, bytes: 10) == TimerAction.none)
        #expect(declared.head(now: 0, declaredLength: .max) == .reject(status: 413))
        var grown = BodyTimeoutState(bodyTimeout: .seconds(1), minRate: 1, maxSize: 1000)
        #expect(grown.head(now: 0, declaredLength: nil) == .arm(at: Self.second))
        #expect(grown.body(now: 1, bytes: 1000) == TimerAction.none)
        #expect(grown.body(now: 2, bytes: 1) == .reject(status: 413))
        #expect(grown.timerFired(now: 5 * Self.second) == TimerAction.none)
    }

    static func framing(_ text: String, cap: Int = 65_536) -> (RequestFramingState, RequestFramingState.Verdict) {
        var state = RequestFramingState(maxBodySize: cap)
        let verdict = state.received(Array(text.utf8))
        return (state, verdict)
    }

    @Test("a chunk declared over the cap is found at its size line, whatever came before it")
    func chunkSizes() {
        let head = "PUT /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        #expect(Self.framing(head + "8000000000000000\r\nab").1 == .tooLarge(prefix: head.utf8.count))
        #expect(Self.framing(head + "ffffffffffffffffffff").1 == .tooLarge(prefix: head.utf8.count))
        #expect(Self.framing(head + "100000\r\n").1 == .tooLarge(prefix: head.utf8.count))
        let first = head + "2;ext=1\r\nab\r\n"
        #expect(Self.framing(first + "100000\r\n").1 == .tooLarge(prefix: first.utf8.count))
        // After a whole request with a Content-Length body, pipelined.
        let earlier = "PUT /x HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello"
        #expect(Self.framing(earlier + head + "20000\r\n").1 == .tooLarge(prefix: (earlier + head).utf8.count))
        // Within the cap, with trailers, and the next request plain.
        let fine = head + "10000\r\n" + String(repeating: "a", count: 65_536) + "\r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\n\r\n"
        let (state, verdict) = Self.framing(fine)
        #expect(verdict == .pass && state.phase == .head)
        // A size line split across reads is still found; the bytes before it already went on.
        var split = RequestFramingState(maxBodySize: 65_536)
        #expect(split.received(Array((head + "1").utf8)) == .pass)
        #expect(split.received(Array("00000".utf8)) == .tooLarge(prefix: 0))
    }

    @Test("a route's own cap is found at the request line: a chunk or a declared length past it is refused, other routes keep the port's")
    func routeCaps() {
        let routes = [
            RouteBodyLimit(method: "POST", pathPrefix: "/api/notifications/rich", maxBytes: 2 << 20),
            RouteBodyLimit(method: "POST", pathPrefix: "/api/notifications", maxBytes: 65_536),
        ]
        func framing(_ text: String) -> RequestFramingState.Verdict {
            var state = RequestFramingState(maxBodySize: 4 << 20, routes: routes)
            return state.received(Array(text.utf8))
        }
        let chunked = " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        let send = "POST /api/notifications/secure?to_tag=bob" + chunked
        #expect(framing(send + "100000\r\nab") == .tooLarge(prefix: send.utf8.count))
        #expect(framing(send + "10000\r\nab") == .pass)
        // The first match wins; the method must match; other routes have the port's cap.
        #expect(framing("POST /api/notifications/rich?to_tag=bob" + chunked + "100000\r\nab") == .pass)
        #expect(framing("post /API/Notifications?pns=apns" + chunked + "100000\r\nab") == .tooLarge(prefix: ("post /API/Notifications?pns=apns" + chunked).utf8.count))
        #expect(framing("PUT /api/notifications" + chunked + "100000\r\nab") == .pass)
        #expect(framing("POST /elsewhere" + chunked + "100000\r\nab") == .pass)
        // Each request of a connection gets its own route's cap.
        let first = "POST /elsewhere HTTP/1.1\r\ncontent-length: 2\r\n\r\nab"
        #expect(framing(first + send + "100000\r\n") == .tooLarge(prefix: (first + send).utf8.count))
        // A declared or received length, for the guard behind the parser.
        var declared = BodyTimeoutState(bodyTimeout: .seconds(1), maxSize: 4 << 20)
        #expect(declared.head(now: 0, declaredLength: 1 << 20, routeMax: 65_536) == .reject(status: 413))
        #expect(declared.head(now: 0, declaredLength: 1 << 20) == .arm(at: Self.second))
        var grown = BodyTimeoutState(bodyTimeout: .seconds(1), maxSize: 4 << 20)
        _ = grown.head(now: 0, routeMax: 10)
        #expect(grown.body(now: 1, bytes: 11) == .reject(status: 413))
        #expect(ServerLimits(maxBodySize: 1 << 20).maxBody(method: "POST", target: "/x") == 1 << 20)
    }

    @Test("what the framing does not follow turns it off, for the parser to decide")
    func framingOff() {
        #expect(Self.framing("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").0.isOff)
        #expect(Self.framing("GET /device HTTP/1.1\r\nUpgrade: websocket\r\n\r\n").0.isOff)
        #expect(Self.framing("PUT /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n").0.isOff)
        #expect(Self.framing("PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").0.isOff)
        #expect(!Self.framing("GET / HTTP/1.1\r\n\r\n").0.isOff)
    }

    @Test("PINGs within the burst and rate pass, a flood does not, and the bucket refills")
    func pingRate() {
        var state = PingRateState(interval: .seconds(1), burst: 3)
        for _ in 0..<3 { #expect(state.received(now: 0) == true) }
        #expect(state.received(now: 0) == false)
        #expect(state.received(now: Self.second / 2) == false)
        #expect(state.received(now: Self.second + Self.second / 2) == true)
        // One a second forever is fine.
        for tick in 3...100 { #expect(state.received(now: Int64(tick) * Self.second) == true) }
        // Hours of quiet refill no more than the burst.
        for _ in 0..<3 { #expect(state.received(now: 10_000 * Self.second) == true) }
        #expect(state.received(now: 10_000 * Self.second) == false)
    }

    @Test("the connection whose time came first is the one closed for room; none when none is stalled")
    func eviction() {
        #expect(StalledConnections.earliestDue([(key: 1, due: 50), (key: 2, due: nil), (key: 3, due: 20), (key: 4, due: 30)])?.0 == 3)
        #expect(StalledConnections.earliestDue([(key: 1, due: Int64?.none), (key: 2, due: nil)]) == nil)
        #expect(StalledConnections.earliestDue([(key: Int, due: Int64?)]()) == nil)
        // Closed only once its time came; else looked at again then, or a grace from now when sooner.
        let second = Self.second
        #expect(StalledConnections.room([(key: 1, due: second), (key: 2, due: second + 5)], now: second, grace: second) == .evict(1))
        #expect(StalledConnections.room([(key: 1, due: second + 500), (key: 2, due: nil)], now: second, grace: second) == .lookAgain(at: second + 500))
        #expect(StalledConnections.room([(key: 1, due: Int64?.none)], now: second, grace: second) == .lookAgain(at: 2 * second))
        #expect(StalledConnections.room([(key: 1, due: 11 * second)], now: second, grace: second) == .lookAgain(at: 2 * second))
        // No grace: what is due goes at once, and a full server with nothing due looks again
        // after the shortest wait, not at once (which spun its loop).
        #expect(StalledConnections.room([(key: 1, due: second)], now: second, grace: 0) == .evict(1))
        #expect(StalledConnections.room([(key: 1, due: Int64?.none)], now: second, grace: 0) == .lookAgain(at: second + StalledConnections.minimumLook))
        #expect(StalledConnections.room([(key: 1, due: 11 * second)], now: second, grace: 0) == .lookAgain(at: second + StalledConnections.minimumLook))
    }

    @Test("a connection owing bytes may be closed a grace after its stall began; a quiet one (nothing read yet, or kept alive between requests) only ten graces after, at least 10 s")
    func quietConnections() {
        let second = Self.second
        var entry = StalledConnections.Entry(channel: EmbeddedChannel())
        #expect(entry.due(grace: second, quietGrace: 10 * second) == nil)
        entry.quietDepth = 1
        entry.quietSince = 3 * second
        #expect(entry.due(grace: second, quietGrace: 10 * second) == 13 * second)
        // Once the client has begun a head or a body, the shorter grace counts from then.
        entry.depth = 1
        entry.since = 5 * second
        #expect(entry.due(grace: second, quietGrace: 10 * second) == 6 * second)
        entry.evicted = true
        #expect(entry.due(grace: second, quietGrace: 10 * second) == nil)
        #expect(StalledConnections(max: 1, grace: .milliseconds(100)).quietGrace == 10 * second)
        #expect(StalledConnections(max: 1, grace: .seconds(3)).quietGrace == 30 * second)
    }
}
