import NIOCore
import PushFleetCore

/// A connection as the pool's state machine sees it: an identity and the event loop it reads on.
package protocol PooledConnection: AnyObject {
    /// The event loop the connection reads on, by which idle connections are kept.
    var loopID: ObjectIdentifier { get }
}

/// The decisions of `FleetHTTPClient`'s pool, apart from its sockets and its clock: each event (a
/// request, a connection opened, released or closed, a failed connect, the timer, a cancellation,
/// the shutdown) comes in with the time `now` in monotonic nanoseconds, and what to do comes out,
/// for the client to carry out outside its lock.
///
/// A *waiter* is a request that found no idle connection and no free slot. Waiters are served
/// first come, first served, by a released connection or by a slot a close frees, until their
/// deadline (that of the whole request) passes, their task is cancelled or the pool shuts down.
/// A waiter whose deadline has passed is never served, even before the timer has failed it.
///
/// An idle connection is kept for `idleLimit`, or for less when its server said it keeps an idle
/// connection for less (`Keep-Alive: timeout=`); one found past that by a request is handed back
/// to be closed (``takeExpired()``), never used. A server that closes an idle connection while a
/// request is on its way turns a POST into a failure nobody may repeat (RFC 9112 §9.3.1), so the
/// client lets go first (docs/design.md, "Idle connections").
package struct HTTPPoolStateMachine<Connection: PooledConnection> {
    package struct WaiterID: Hashable, Sendable {
        package var raw: UInt64
    }

    /// Why a request gets no connection.
    package enum Failure: Equatable, Sendable {
        /// Its deadline passed first.
        case timeout
        /// Its task was cancelled while it waited.
        case cancelled
        case shutDown
    }

    /// What a request goes on with.
    package enum Grant {
        /// An open idle connection, the request's until it releases it.
        case use(Connection)
        /// A slot kept for the request: it opens a connection (`ordinal` picks the source address)
        /// and reports `opened` or `connectFailed`.
        case connect(ordinal: Int)
        case fail(Failure)
    }

    /// When the client calls `timerFired`: the earliest waiter's deadline. The generation tells a
    /// timer replaced by an earlier one apart, should it fire anyway.
    package struct TimerArm: Equatable, Sendable {
        package var at: Int64
        package var generation: UInt64
    }

    package enum RequestAction {
        case proceed(Grant)
        /// Nothing free: park under this id, with a continuation to resume.
        case wait(WaiterID)
    }

    package enum ParkAction {
        /// Something freed up between `request` and `park`.
        case proceed(Grant)
        /// Parked; arm the timer when given (an earlier timer is no longer needed).
        case parked(arm: TimerArm?)
    }

    package enum WakeAction {
        case resume(WaiterID, Grant)
        case none
    }

    package struct TimerAction {
        /// Waiters whose deadline passed, to fail with `.timeout`.
        package var expired: [WaiterID]
        package var arm: TimerArm?
    }

    package struct ShutdownAction {
        /// Waiters to fail with `.shutDown`.
        package var waiters: [WaiterID]
        package var close: [Connection]
    }

    private struct Waiter {
        var id: WaiterID
        var deadline: Int64
    }

    package let maxConnections: Int
    /// Idle connections by the event loop they read on: a list per loop, found by a scan (a group
    /// has a loop or a few per core).
    private var idle: [(loop: ObjectIdentifier, connections: [(connection: Connection, until: Int64)])] = []
    /// Idle connections a request found past their time, for the client to close.
    private var expired: [Connection] = []
    /// How long an idle connection is kept at most, in nanoseconds.
    package let idleLimit: Int64
    /// Every open connection, to close at shutdown.
    private var all: [ObjectIdentifier: Connection] = [:]
    /// Slots taken: connections open or being opened.
    package private(set) var open = 0
    private var connectsStarted = 0
    private var waiters = CircularBuffer<Waiter>()
    private var nextWaiter: UInt64 = 0
    package private(set) var timer: TimerArm?
    private var timerGeneration: UInt64 = 0
    package private(set) var isShutDown = false

    /// AsyncHTTPClient's default idle limit, under the 75 s of nginx's and this project's servers.
    package static var defaultIdleLimit: Int64 { 60_000_000_000 }

    package init(maxConnections: Int, idleLimit: Int64 = defaultIdleLimit) {
        self.maxConnections = max(1, maxConnections)
        self.idleLimit = max(0, idleLimit)
    }

    /// How long to keep a connection idle whose server announced it keeps one `seconds`: a second
    /// less, or half of it when that is longer (an announcement under two seconds), so that the
    /// client lets go first.
    package static func keepFor(announced seconds: Int) -> Int64 {
        let announced = Int64(min(max(0, seconds), 86_400)) * 1_000_000_000
        return max(announced - 1_000_000_000, announced / 2)
    }

    /// Idle connections found past their time since the last call, to close. Their slots are
    /// free already: their `closed` changes nothing.
    package mutating func takeExpired() -> [Connection] {
        guard !expired.isEmpty else { return [] }
        defer { expired = [] }
        return expired
    }

    package var waiting: Int { waiters.count }
    package var idleCount: Int { idle.reduce(0) { $0 + $1.connections.count } }

    // MARK: Requests

    /// A request to be sent by `deadline`; an idle connection of `loop` first.
    package mutating func request(preferring loop: ObjectIdentifier?, deadline: Int64, now: Int64) -> RequestAction {
        if let grant = grant(preferring: loop, deadline: deadline, now: now) { return .proceed(grant) }
        nextWaiter += 1
        return .wait(WaiterID(raw: nextWaiter))
    }

    /// An idle connection, one of `loop` first, for a request that is sent at once or some other
    /// way: nil when none is idle, and nothing is asked of the pool then.
    package mutating func requestIdle(preferring loop: ObjectIdentifier?, now: Int64) -> Connection? {
        isShutDown ? nil : takeIdle(preferring: loop, now: now)
    }

    /// The request `request` told to wait, now with a continuation to resume.
    package mutating func park(_ id: WaiterID, preferring loop: ObjectIdentifier?, deadline: Int64, now: Int64) -> ParkAction {
        if let grant = grant(preferring: loop, deadline: deadline, now: now) { return .proceed(grant) }
        waiters.append(Waiter(id: id, deadline: deadline))
        if let timer, timer.at <= deadline { return .parked(arm: nil) }
        return .parked(arm: arm(at: deadline))
    }

    package mutating func cancel(_ id: WaiterID) -> WakeAction {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return .none }
        waiters.remove(at: index)
        return .resume(id, .fail(.cancelled))
    }

    private mutating func grant(preferring loop: ObjectIdentifier?, deadline: Int64, now: Int64) -> Grant? {
        if isShutDown { return .fail(.shutDown) }
        if deadline <= now { return .fail(.timeout) }
        if let connection = takeIdle(preferring: loop, now: now) { return .use(connection) }
        guard open < maxConnections else { return nil }
        open += 1
        connectsStarted += 1
        return .connect(ordinal: connectsStarted)
    }

    // MARK: Connections

    /// A connect succeeded; false when the pool shut down meanwhile (close it; `connectFailed`).
    package mutating func opened(_ connection: Connection) -> Bool {
        guard !isShutDown else { return false }
        all[ObjectIdentifier(connection)] = connection
        return true
    }

    /// Back after a complete keep-alive exchange: to the first waiter still in time, else idle,
    /// for `idleLimit` or `keepFor` nanoseconds, whichever is shorter.
    package mutating func released(_ connection: Connection, now: Int64, keepFor: Int64? = nil) -> WakeAction {
        guard !isShutDown else { return .none }
        if let id = takeWaiter(now: now) { return .resume(id, .use(connection)) }
        putIdle(connection, until: Saturating.add(now, min(idleLimit, max(0, keepFor ?? idleLimit))))
        return .none
    }

    package mutating func closed(_ connection: Connection, now: Int64) -> WakeAction {
        // One let go past its idle time gave up its slot then.
        guard all.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return .none }
        removeIdle(connection)
        return slotFreed(now: now)
    }

    package mutating func connectFailed(now: Int64) -> WakeAction {
        slotFreed(now: now)
    }

    /// The slot passes straight to the first waiter in time, so that no later request takes it.
    private mutating func slotFreed(now: Int64) -> WakeAction {
        if !isShutDown, let id = takeWaiter(now: now) {
            connectsStarted += 1
            return .resume(id, .connect(ordinal: connectsStarted))
        }
        open -= 1
        return .none
    }

    // MARK: Deadlines and shutdown

    /// Fails the waiters whose deadline passed; re-arms for the next deadline when `generation`
    /// is the armed timer's (a replaced timer that fired anyway leaves the armed one alone).
    package mutating func timerFired(generation: UInt64, now: Int64) -> TimerAction {
        var expired: [WaiterID] = []
        if waiters.contains(where: { $0.deadline <= now }) {
            var kept = CircularBuffer<Waiter>(initialCapacity: waiters.count)
            for waiter in waiters {
                if waiter.deadline <= now {
                    expired.append(waiter.id)
                } else {
                    kept.append(waiter)
                }
            }
            waiters = kept
        }
        let earliest = waiters.lazy.map(\.deadline).min()
        guard let timer, timer.generation == generation else { return TimerAction(expired: expired, arm: nil) }
        self.timer = nil
        return TimerAction(expired: expired, arm: earliest.map { arm(at: $0) })
    }

    package mutating func shutdown() -> ShutdownAction {
        isShutDown = true
        let failed = waiters.map(\.id)
        waiters.removeAll()
        idle.removeAll()
        expired.removeAll()
        timer = nil
        return ShutdownAction(waiters: failed, close: Array(all.values))
    }

    private mutating func arm(at instant: Int64) -> TimerArm {
        timerGeneration += 1
        let timer = TimerArm(at: instant, generation: timerGeneration)
        self.timer = timer
        return timer
    }

    /// The first waiter whose deadline has not passed. Those whose has stay for the timer to fail.
    private mutating func takeWaiter(now: Int64) -> WaiterID? {
        guard let first = waiters.first else { return nil }
        if first.deadline > now { return waiters.removeFirst().id }
        guard let index = waiters.firstIndex(where: { $0.deadline > now }) else { return nil }
        return waiters.remove(at: index).id
    }

    // MARK: Idle connections

    /// An idle connection still in its time, one of `loop` first; those past it go to `expired`.
    private mutating func takeIdle(preferring loop: ObjectIdentifier?, now: Int64) -> Connection? {
        while let (connection, until) = popIdle(preferring: loop) {
            if until > now { return connection }
            // No waiter can want the slot: a request waits only while nothing is idle.
            expired.append(connection)
            all[ObjectIdentifier(connection)] = nil
            open -= 1
        }
        return nil
    }

    /// The most recently released idle connection, one of `loop` first.
    private mutating func popIdle(preferring loop: ObjectIdentifier?) -> (Connection, Int64)? {
        if let loop, let list = idle.firstIndex(where: { $0.loop == loop }), let last = idle[list].connections.popLast() {
            return last
        }
        guard let list = idle.firstIndex(where: { !$0.connections.isEmpty }) else { return nil }
        return idle[list].connections.popLast()
    }

    private mutating func putIdle(_ connection: Connection, until: Int64) {
        if let list = idle.firstIndex(where: { $0.loop == connection.loopID }) {
            idle[list].connections.append((connection, until))
        } else {
            idle.append((connection.loopID, [(connection, until)]))
        }
    }

    private mutating func removeIdle(_ connection: Connection) {
        guard let list = idle.firstIndex(where: { $0.loop == connection.loopID }),
            let index = idle[list].connections.firstIndex(where: { $0.connection === connection })
        else { return }
        idle[list].connections.remove(at: index)
    }
}

extension HTTPPoolStateMachine.Grant: Sendable where Connection: Sendable {}
extension HTTPPoolStateMachine.RequestAction: Sendable where Connection: Sendable {}
extension HTTPPoolStateMachine.ParkAction: Sendable where Connection: Sendable {}
extension HTTPPoolStateMachine.WakeAction: Sendable where Connection: Sendable {}

/// Connections compare by identity.
extension HTTPPoolStateMachine.Grant: Equatable {
    package static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.use(let a), .use(let b)): a === b
        case (.connect(let a), .connect(let b)): a == b
        case (.fail(let a), .fail(let b)): a == b
        default: false
        }
    }
}

extension HTTPPoolStateMachine.RequestAction: Equatable {}
extension HTTPPoolStateMachine.ParkAction: Equatable {}
extension HTTPPoolStateMachine.WakeAction: Equatable {}
extension HTTPPoolStateMachine.TimerAction: Equatable {}
