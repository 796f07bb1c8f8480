import Testing

import PushFleetClients

/// The fleet HTTP pool's decisions with no sockets: connections are plain objects, and time is a
/// number of nanoseconds the test passes in.
@Suite("HTTP pool state machine")
struct HTTPPoolStateMachineTests {
    enum LoopA {}
    enum LoopB {}
    static let loopA = ObjectIdentifier(LoopA.self)
    static let loopB = ObjectIdentifier(LoopB.self)
    static let second: Int64 = 1_000_000_000

    final class FakeConnection: PooledConnection {
        let loopID: ObjectIdentifier
        init(on loop: ObjectIdentifier = loopA) { loopID = loop }
    }

    typealias Machine = HTTPPoolStateMachine<FakeConnection>

    /// The machine behind a reference, so that `#expect` can take its events.
    final class Pool {
        var machine: Machine
        init(_ machine: Machine) { self.machine = machine }
    }

    struct Unexpected: Error, CustomStringConvertible {
        var description: String
    }

    /// A pool of `size` connections, all open and in use.
    static func fullPool(_ size: Int) throws -> (Pool, [FakeConnection]) {
        var machine = Machine(maxConnections: size)
        var connections: [FakeConnection] = []
        for ordinal in 1...size {
            let action = machine.request(preferring: nil, deadline: 100 * second, now: 0)
            guard action == .proceed(.connect(ordinal: ordinal)) else { throw Unexpected(description: "\(action)") }
            let connection = FakeConnection()
            let opened = machine.opened(connection)
            #expect(opened)
            connections.append(connection)
        }
        return (Pool(machine), connections)
    }

    /// A request arriving at `now` that finds nothing free and parks; its id and the timer armed.
    static func park(_ pool: Pool, now: Int64, timeout: Int64) throws -> (Machine.WaiterID, Machine.TimerArm?) {
        let request = pool.machine.request(preferring: nil, deadline: now + timeout, now: now)
        guard case .wait(let id) = request else { throw Unexpected(description: "\(request)") }
        let park = pool.machine.park(id, preferring: nil, deadline: now + timeout, now: now)
        guard case .parked(let arm) = park else { throw Unexpected(description: "\(park)") }
        return (id, arm)
    }

    @Test("a request sent at once takes an idle connection, its loop's first, and asks nothing of the pool when none is idle")
    func requestIdle() throws {
        let (pool, connections) = try Self.fullPool(2)
        #expect(pool.machine.requestIdle(preferring: Self.loopA, now: 0) == nil)
        #expect(pool.machine.waiting == 0)
        let onB = FakeConnection(on: Self.loopB)
        let grown = Pool(Machine(maxConnections: 3))
        let all = connections + [onB]
        for _ in all { _ = grown.machine.request(preferring: nil, deadline: 100 * Self.second, now: 0) }
        for connection in all { _ = grown.machine.opened(connection) }
        for connection in all { _ = grown.machine.released(connection, now: 0) }
        #expect(grown.machine.idleCount == 3)
        #expect(grown.machine.requestIdle(preferring: Self.loopB, now: 0) === onB)
        let next = grown.machine.requestIdle(preferring: Self.loopB, now: 0)
        #expect(next != nil && next !== onB)
        _ = grown.machine.requestIdle(preferring: nil, now: 0)
        #expect(grown.machine.requestIdle(preferring: nil, now: 0) == nil && grown.machine.idleCount == 0)
        _ = grown.machine.released(onB, now: 0)
        _ = grown.machine.shutdown()
        #expect(grown.machine.requestIdle(preferring: Self.loopB, now: 0) == nil)
    }

    @Test("a request takes an idle connection of its own loop first, opens connections up to the limit, then waits")
    func requests() throws {
        let pool = Pool(Machine(maxConnections: 2))
        #expect(pool.machine.request(preferring: Self.loopA, deadline: Self.second, now: 0) == .proceed(.connect(ordinal: 1)))
        #expect(pool.machine.request(preferring: Self.loopA, deadline: Self.second, now: 0) == .proceed(.connect(ordinal: 2)))
        let onA = FakeConnection(on: Self.loopA)
        let onB = FakeConnection(on: Self.loopB)
        let opened = [pool.machine.opened(onA), pool.machine.opened(onB)]
        #expect(opened == [true, true])
        guard case .wait = pool.machine.request(preferring: Self.loopA, deadline: Self.second, now: 0) else {
            Issue.record("a full pool should make the request wait")
            return
        }
        #expect(pool.machine.released(onA, now: 0) == .none)
        #expect(pool.machine.released(onB, now: 0) == .none)
        #expect(pool.machine.idleCount == 2 && pool.machine.open == 2)
        #expect(pool.machine.request(preferring: Self.loopB, deadline: Self.second, now: 0) == .proceed(.use(onB)))
        #expect(pool.machine.request(preferring: Self.loopB, deadline: Self.second, now: 0) == .proceed(.use(onA)))
        #expect(pool.machine.request(preferring: nil, deadline: 0, now: 0) == .proceed(.fail(.timeout)))
    }

    @Test("waiters are served first come, first served, as connections are released")
    func fifo() throws {
        let (pool, connections) = try Self.fullPool(1)
        let (first, arm) = try Self.park(pool, now: 0, timeout: 10 * Self.second)
        let (second, _) = try Self.park(pool, now: 1, timeout: 10 * Self.second)
        let (third, _) = try Self.park(pool, now: 2, timeout: 10 * Self.second)
        #expect(arm?.at == 10 * Self.second)
        #expect(pool.machine.waiting == 3)
        for waiter in [first, second, third] {
            #expect(pool.machine.released(connections[0], now: Self.second) == .resume(waiter, .use(connections[0])))
        }
        #expect(pool.machine.released(connections[0], now: Self.second) == .none)
        #expect(pool.machine.waiting == 0 && pool.machine.idleCount == 1)
    }

    @Test("a waiter times out at its deadline and not before; the timer is re-armed for the next one")
    func timeout() throws {
        let (pool, _) = try Self.fullPool(1)
        let (first, arm) = try Self.park(pool, now: 0, timeout: 2 * Self.second)
        let (second, noArm) = try Self.park(pool, now: Self.second, timeout: 2 * Self.second)
        let armed = try #require(arm)
        #expect(armed.at == 2 * Self.second && noArm == nil)

        // Fired a nanosecond early (another clock's rounding): nothing fails, the timer stays.
        let early = pool.machine.timerFired(generation: armed.generation, now: 2 * Self.second - 1)
        #expect(early.expired.isEmpty && early.arm?.at == 2 * Self.second)
        let atDeadline = pool.machine.timerFired(generation: try #require(early.arm).generation, now: 2 * Self.second)
        #expect(atDeadline.expired == [first] && atDeadline.arm?.at == 3 * Self.second)
        #expect(pool.machine.waiting == 1)
        let last = pool.machine.timerFired(generation: try #require(atDeadline.arm).generation, now: 3 * Self.second)
        #expect(last.expired == [second] && last.arm == nil)
        #expect(pool.machine.waiting == 0 && pool.machine.timer == nil)
    }

    @Test("an earlier deadline re-arms the timer; the replaced timer firing anyway leaves the armed one alone")
    func earlierDeadline() throws {
        let (pool, _) = try Self.fullPool(1)
        let (slow, slowArm) = try Self.park(pool, now: 0, timeout: 10 * Self.second)
        let (fast, fastArm) = try Self.park(pool, now: 0, timeout: Self.second)
        let replaced = try #require(slowArm)
        let armed = try #require(fastArm)
        #expect(armed.at == Self.second && armed.generation != replaced.generation)

        let fired = pool.machine.timerFired(generation: armed.generation, now: Self.second)
        #expect(fired.expired == [fast] && fired.arm?.at == 10 * Self.second)
        let rearmed = try #require(fired.arm)
        // The replaced timer, whose cancel came too late, fires at its own instant.
        let stale = pool.machine.timerFired(generation: replaced.generation, now: 10 * Self.second)
        #expect(stale.expired == [slow] && stale.arm == nil && pool.machine.timer == rearmed)
        let last = pool.machine.timerFired(generation: rearmed.generation, now: 10 * Self.second)
        #expect(last.expired.isEmpty && last.arm == nil)
        #expect(pool.machine.timer == nil)
    }

    @Test("cancelling a waiter removes exactly that one, once")
    func cancel() throws {
        let (pool, connections) = try Self.fullPool(1)
        let (first, _) = try Self.park(pool, now: 0, timeout: 10 * Self.second)
        let (second, _) = try Self.park(pool, now: 0, timeout: 10 * Self.second)
        let (third, _) = try Self.park(pool, now: 0, timeout: 10 * Self.second)
        #expect(pool.machine.cancel(second) == .resume(second, .fail(.cancelled)))
        #expect(pool.machine.cancel(second) == .none)
        #expect(pool.machine.waiting == 2)
        #expect(pool.machine.released(connections[0], now: 1) == .resume(first, .use(connections[0])))
        #expect(pool.machine.released(connections[0], now: 1) == .resume(third, .use(connections[0])))
        // Served already: the cancellation comes too late and changes nothing.
        #expect(pool.machine.cancel(first) == .none)
        #expect(pool.machine.released(connections[0], now: 1) == .none && pool.machine.idleCount == 1)
    }

    @Test("a close frees a slot and the first waiter connects with it; a failed connect passes it on")
    func closeFreesSlot() throws {
        let (pool, connections) = try Self.fullPool(2)
        let (first, _) = try Self.park(pool, now: 0, timeout: 10 * Self.second)
        let (second, _) = try Self.park(pool, now: 0, timeout: 10 * Self.second)
        #expect(pool.machine.closed(connections[0], now: 1) == .resume(first, .connect(ordinal: 3)))
        #expect(pool.machine.open == 2)
        #expect(pool.machine.connectFailed(now: 1) == .resume(second, .connect(ordinal: 4)))
        #expect(pool.machine.connectFailed(now: 1) == .none)
        #expect(pool.machine.open == 1)
        // An idle connection that closes is no longer handed out.
        #expect(pool.machine.released(connections[1], now: 1) == .none && pool.machine.idleCount == 1)
        #expect(pool.machine.closed(connections[1], now: 1) == .none)
        #expect(pool.machine.idleCount == 0 && pool.machine.open == 0)
        #expect(pool.machine.request(preferring: nil, deadline: Self.second, now: 1) == .proceed(.connect(ordinal: 5)))
    }

    @Test("no connection or slot is handed to a waiter whose deadline passed, even before the timer fails it")
    func noGrantAfterDeadline() throws {
        let (pool, connections) = try Self.fullPool(2)
        let (late, arm) = try Self.park(pool, now: 0, timeout: Self.second)
        let (inTime, _) = try Self.park(pool, now: 0, timeout: 5 * Self.second)
        #expect(pool.machine.released(connections[0], now: Self.second) == .resume(inTime, .use(connections[0])))
        #expect(pool.machine.closed(connections[1], now: Self.second) == .none)
        #expect(pool.machine.open == 1)
        let fired = pool.machine.timerFired(generation: try #require(arm).generation, now: Self.second)
        #expect(fired.expired == [late] && fired.arm == nil)
        // A request whose deadline passes between being told to wait and parking is failed at once.
        let (full, _) = try Self.fullPool(1)
        guard case .wait(let id) = full.machine.request(preferring: nil, deadline: 2 * Self.second, now: Self.second) else {
            Issue.record("a full pool should make the request wait")
            return
        }
        #expect(full.machine.park(id, preferring: nil, deadline: 2 * Self.second, now: 2 * Self.second) == .proceed(.fail(.timeout)))
        #expect(full.machine.waiting == 0)
    }

    @Test("shutdown fails every waiter and closes every connection; nothing is handed out after it")
    func shutdown() throws {
        let (pool, connections) = try Self.fullPool(2)
        let (first, _) = try Self.park(pool, now: 0, timeout: 10 * Self.second)
        let (second, _) = try Self.park(pool, now: 0, timeout: 10 * Self.second)
        let action = pool.machine.shutdown()
        #expect(action.waiters == [first, second])
        #expect(Set(action.close.map(ObjectIdentifier.init)) == Set(connections.map(ObjectIdentifier.init)))
        #expect(pool.machine.waiting == 0 && pool.machine.timer == nil)
        #expect(pool.machine.released(connections[0], now: 1) == .none && pool.machine.idleCount == 0)
        #expect(pool.machine.closed(connections[0], now: 1) == .none)
        #expect(pool.machine.request(preferring: nil, deadline: Self.second, now: 1) == .proceed(.fail(.shutDown)))
        let opened = pool.machine.opened(FakeConnection())
        #expect(!opened)
    }

    @Test("an idle connection past the pool's limit, or past what its server announced, is handed back to close and frees its slot")
    func idleLimit() throws {
        let pool = Pool(Machine(maxConnections: 2, idleLimit: 60 * Self.second))
        let (old, announced) = (FakeConnection(), FakeConnection())
        for connection in [old, announced] {
            _ = pool.machine.request(preferring: nil, deadline: 100 * Self.second, now: 0)
            _ = pool.machine.opened(connection)
        }
        // Kept 60 s; the other's server said 5 s, so it is kept 4.
        #expect(pool.machine.released(old, now: 0) == .none)
        #expect(pool.machine.released(announced, now: 0, keepFor: Machine.keepFor(announced: 5)) == .none)
        #expect(pool.machine.requestIdle(preferring: nil, now: 4 * Self.second - 1) === announced)
        #expect(pool.machine.takeExpired().isEmpty)
        _ = pool.machine.released(announced, now: 4 * Self.second - 1, keepFor: Machine.keepFor(announced: 5))
        // At 8 s the one released last is past its 4 s: closed, and the request takes the other.
        #expect(pool.machine.request(preferring: nil, deadline: 100 * Self.second, now: 8 * Self.second) == .proceed(.use(old)))
        #expect(pool.machine.takeExpired().map(ObjectIdentifier.init) == [ObjectIdentifier(announced)])
        #expect(pool.machine.takeExpired().isEmpty)
        #expect(pool.machine.open == 1)
        // Its close comes later and frees nothing twice.
        #expect(pool.machine.closed(announced, now: 8 * Self.second) == .none)
        #expect(pool.machine.open == 1)
        _ = pool.machine.released(old, now: 8 * Self.second)
        // Past 60 s idle: closed, and the slot it held is the request's to connect with.
        #expect(pool.machine.request(preferring: nil, deadline: 100 * Self.second, now: 68 * Self.second) == .proceed(.connect(ordinal: 3)))
        #expect(pool.machine.takeExpired().map(ObjectIdentifier.init) == [ObjectIdentifier(old)])
        #expect(pool.machine.open == 1 && pool.machine.idleCount == 0)
        // A shutdown closes what is still open, not what was let go.
        _ = pool.machine.closed(old, now: 68 * Self.second)
        #expect(pool.machine.shutdown().close.isEmpty)
    }

    @Test("a server's announced keep-alive becomes a second less, half of it under two seconds, capped at a day")
    func keepFor() {
        #expect(Machine.keepFor(announced: 5) == 4 * Self.second)
        #expect(Machine.keepFor(announced: 75) == 74 * Self.second)
        #expect(Machine.keepFor(announced: 1) == Self.second / 2)
        #expect(Machine.keepFor(announced: 0) == 0)
        #expect(Machine.keepFor(announced: -3) == 0)
        #expect(Machine.keepFor(announced: .max) == 86_399 * Self.second)
        // Kept zero: not reused after any idleness at all.
        let pool = Pool(Machine(maxConnections: 1))
        let connection = FakeConnection()
        _ = pool.machine.request(preferring: nil, deadline: Self.second, now: 0)
        _ = pool.machine.opened(connection)
        _ = pool.machine.released(connection, now: 5, keepFor: Machine.keepFor(announced: 0))
        #expect(pool.machine.requestIdle(preferring: nil, now: 5) == nil)
        #expect(pool.machine.takeExpired().count == 1 && pool.machine.open == 0)
    }
}
