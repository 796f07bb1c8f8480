import PushFleetCore
import Testing

/// The multiplexed gateway connection's machine on its own: no sockets, no clock — time is
/// whatever the test says it is in each event.
@Suite("Gateway mux machine")
struct GatewayMuxTests {
    static let ms: Int64 = 1_000_000

    static func machine(seed: UInt64 = 7) -> GatewayMux {
        GatewayMux(backoff: Backoff(seed: seed))
    }

    /// Fails `count` connection attempts in a row, a millisecond each; returns each wait.
    static func failures(_ mux: inout GatewayMux, count: Int, from start: Int64 = 0) -> [Int64] {
        var now = start
        var waits: [Int64] = []
        for _ in 0..<count {
            guard case .retry(let instant, let error) = mux.dropped("connect", now: now + ms) else {
                Issue.record("no retry")
                return waits
            }
            #expect(error == "connect")
            waits.append(instant - (now + ms))
            now = instant
            #expect(mux.retryDue(now: now) == .connect)
        }
        return waits
    }

    @Test("start connects; a connection with nobody on it sends nothing")
    func start() {
        var mux = Self.machine()
        #expect(mux.start(now: 0) == .connect)
        #expect(mux.start(now: 1) == .none)
        #expect(mux.connected(now: 5) == .none)
        #expect(mux.isConnected)
    }

    @Test("failed attempts back off within min(cap, base · 2ⁿ), jittered, capped at 10 s")
    func backoffGrows() {
        var mux = Self.machine()
        _ = mux.start(now: 0)
        let waits = Self.failures(&mux, count: 12)
        for (n, wait) in waits.enumerated() {
            let ceiling = min(10_000 * Self.ms, 200 * Self.ms << n)
            #expect(wait >= 0 && wait <= ceiling, "retry \(n) waited \(wait)")
        }
        #expect(mux.attempt == 12)
        // Jittered: the waits past the cap all differ.
        #expect(Set(waits.suffix(6)).count == 6)
    }

    @Test("two channels seeded differently do not retry in step")
    func seedsDiffer() {
        var first = Self.machine(seed: 1)
        var second = Self.machine(seed: 2)
        _ = first.start(now: 0)
        _ = second.start(now: 0)
        #expect(Self.failures(&first, count: 5) != Self.failures(&second, count: 5))
    }

    @Test("a connection that held 10 s starts the backoff afresh; a short one does not")
    func heldResets() {
        var mux = Self.machine()
        _ = mux.start(now: 0)
        var now = Self.failures(&mux, count: 4).reduce(0) { $0 + $1 + Self.ms }
        #expect(mux.attempt == 4)
        _ = mux.connected(now: now + Self.ms)
        // Dropped after a second: still counting.
        _ = mux.dropped("connection_closed", now: now + 1_000 * Self.ms)
        #expect(mux.attempt == 5)
        now += 2_000 * Self.ms
        #expect(mux.retryDue(now: now) == .connect)
        _ = mux.connected(now: now + Self.ms)
        guard case .retry(let instant, _) = mux.dropped("connection_closed", now: now + GatewayMux.heldLong + Self.ms) else {
            Issue.record("no retry")
            return
        }
        #expect(mux.attempt == 1)
        #expect(instant - (now + GatewayMux.heldLong + Self.ms) <= 200 * Self.ms)
    }

    @Test("a connection that ends with no error retries without reporting one")
    func quietEnd() {
        var mux = Self.machine()
        _ = mux.start(now: 0)
        _ = mux.connected(now: 1)
        guard case .retry(_, let error) = mux.dropped(nil, now: 2) else {
            Issue.record("no retry")
            return
        }
        #expect(error == nil)
    }

    @Test("devices that join before the first connection is up are sent nothing, then subscribed when it is, without renewing their registrations")
    func subscribeOnFirstConnect() {
        var mux = Self.machine()
        _ = mux.start(now: 0)
        #expect(mux.add("b") == .none)
        #expect(mux.add("a") == .none)
        #expect(mux.connected(now: 10) == .subscribe(["a", "b"]))
        #expect(mux.add("c") == .subscribe(["c"]))
    }

    @Test("after a drop, every device still carried is resubscribed; those that left are not")
    func resubscribeAfterDrop() {
        var mux = Self.machine()
        _ = mux.start(now: 0)
        _ = mux.connected(now: 1)
        for token in ["a", "b", "c"] { #expect(mux.add(token) == .subscribe([token])) }
        guard case .retry(let instant, _) = mux.dropped("connection_closed", now: 100) else {
            Issue.record("no retry")
            return
        }
        // Leaving while down: nothing to send, and not carried any more.
        #expect(mux.remove("b") == .none)
        #expect(mux.add("d") == .none)
        #expect(mux.retryDue(now: instant) == .connect)
        #expect(mux.connected(now: instant + 1) == .resubscribe(["a", "c", "d"]))
        #expect(mux.remove("a") == .unsubscribe(["a"]))
        #expect(mux.tokens == ["c", "d"])
    }

    @Test("devices the service took offline come back after a pause, unless they left meanwhile")
    func takenOffline() {
        var mux = Self.machine()
        _ = mux.start(now: 0)
        _ = mux.connected(now: 1)
        _ = mux.add("a")
        _ = mux.add("b")
        #expect(mux.takenOffline(["a", "b"], now: 50) == .resubscribeAt(50 + GatewayMux.offlinePause, ["a", "b"]))
        _ = mux.remove("a")
        #expect(mux.pauseEnded(["a", "b"]) == .subscribe(["b"]))
        #expect(mux.pauseEnded(["a"]) == .none)
    }

    @Test("no resubscription on a connection that dropped during the pause")
    func pauseAcrossDrop() {
        var mux = Self.machine()
        _ = mux.start(now: 0)
        _ = mux.connected(now: 1)
        _ = mux.add("a")
        _ = mux.takenOffline(["a"], now: 10)
        _ = mux.dropped("connection_closed", now: 20)
        #expect(mux.pauseEnded(["a"]) == .none)
        #expect(mux.takenOffline(["a"], now: 30) == .none)
    }

    @Test("stop: no more connections, whatever comes next")
    func stop() {
        var mux = Self.machine()
        _ = mux.start(now: 0)
        _ = mux.connected(now: 1)
        _ = mux.add("a")
        #expect(mux.stop() == .giveUp)
        #expect(mux.isStopped)
        #expect(mux.dropped("cancelled", now: 5) == .giveUp)
        #expect(mux.retryDue(now: 6) == .giveUp)
        #expect(mux.connected(now: 7) == .none)
        #expect(mux.start(now: 8) == .none)
    }

    @Test("stopped while waiting to retry: the retry gives up")
    func stopWhileWaiting() {
        var mux = Self.machine()
        _ = mux.start(now: 0)
        _ = mux.dropped("connect", now: 1)
        _ = mux.stop()
        #expect(mux.retryDue(now: 1_000 * Self.ms) == .giveUp)
    }
}
