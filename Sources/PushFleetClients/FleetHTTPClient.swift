import Foundation
package import NIOCore
package import NIOHTTP1
import NIOPosix
import PushFleetCore
import Synchronization

/// An answer from `FleetHTTPClient`: the status and the whole body.
package struct HTTPAnswer: Sendable {
    package var status: Int
    package var body: ByteBuffer
    package var fields = AnswerFields()

    package var headers: HTTPHeaders { fields.headers }
}

package enum FleetHTTPError: Error, Sendable, Equatable {
    case timeout
    case connectionClosed
    /// A reused keep-alive connection closed before any answer: the server had let it go idle.
    case staleConnection
    /// The connection had closed before the request was written: nothing was sent, so any
    /// request may be tried again.
    case closedBeforeSending
    case connect(String)
    case bodyTooLarge
    case shutDown
    /// The request cannot be written as it is (a control character in a header, a space in
    /// the target); nothing was sent.
    case invalidRequest(String)
    /// The answer broke HTTP/1.1's grammar; the connection was closed.
    case malformedAnswer(String)
}

/// Host and port of an `http://` or `ws://` base URL, an IPv6 host without its brackets.
package struct Origin: Sendable {
    package var host: String
    package var port: Int

    package init?(_ url: String) {
        guard let parsed = URL(string: url), let host = parsed.host else { return nil }
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.port = parsed.port ?? 80
    }

    /// Whether the host is this machine's loopback.
    package var isLoopback: Bool { LoopbackHost.contains(host) }
}

/// An HTTP/1.1 keep-alive pool to one origin, built straight on NIO: one request in flight per
/// connection, the answer handed over in the event loop's read callback.
///
/// The fleet's hot path. AsyncHTTPClient spends most of a request's CPU on its general
/// machinery (request state machines, streaming bodies, hops between its event loop and the
/// caller); this pool does only what a keep-alive GET/POST to a known origin needs, through
/// NIO's own HTTP/1.1 codec. It speaks plain HTTP; `BackendClient` takes AsyncHTTPClient for
/// https.
package final class FleetHTTPClient: Sendable {
    let host: String
    let port: Int
    let maxConnections: Int
    let group: any EventLoopGroup
    let sourceAddresses: [SocketAddress]
    private let hostHeader: String
    private let maxBody = 8 * 1024 * 1024
    private let state: Mutex<PoolState>
    /// Runs the one timer for the waiters' deadlines.
    private let timerLoop: any EventLoop

    private typealias Pool = HTTPPoolStateMachine<Connection>

    /// The pool's decisions, and what carrying them out needs.
    private struct PoolState {
        var machine: Pool
        /// Parked requests, by the id the machine gave them.
        var waiters: [Pool.WaiterID: UnsafeContinuation<Pool.Grant, Never>] = [:]
        /// The timer the machine armed last.
        var timer: Scheduled<Void>?

        /// The continuation `action` wakes, taken out under the same lock as the decision.
        mutating func take(_ action: Pool.WakeAction) -> (UnsafeContinuation<Pool.Grant, Never>, Pool.Grant)? {
            guard case .resume(let id, let grant) = action, let continuation = waiters.removeValue(forKey: id) else { return nil }
            return (continuation, grant)
        }
    }

    /// - Parameter sourceAddresses: local addresses to bind connections to in turn, so that one
    ///   origin can take more connections than one source address has ephemeral ports.
    ///   - idleLimit: how long a connection is kept idle at most, 60 s unless given (less when its
    ///     server announces less with `Keep-Alive: timeout=`).
    package init(
        host: String, port: Int, maxConnections: Int, group: any EventLoopGroup, sourceAddresses: [SocketAddress] = [],
        idleLimit: Duration? = nil
    ) {
        self.host = host
        self.port = port
        self.maxConnections = max(1, maxConnections)
        self.group = group
        self.sourceAddresses = sourceAddresses
        let bracketed = host.contains(":") ? "[\(host)]" : host
        self.hostHeader = port == 80 ? bracketed : "\(bracketed):\(port)"
        self.state = Mutex(PoolState(machine: Pool(maxConnections: maxConnections, idleLimit: idleLimit?.nanoseconds ?? Pool.defaultIdleLimit)))
        self.timerLoop = group.next()
    }

    /// Sends a request and reads its answer. `timeout` bounds the whole request: the wait for a
    /// connection, the connect and the exchange. A request whose task is cancelled while it waits
    /// for a connection throws `CancellationError`.
    package func execute(
        _ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: ByteBuffer? = nil, timeout: Duration
    ) async throws -> HTTPAnswer {
        let message = try HTTP1Request(method: method, target: path, host: hostHeader, headers: headers, body: body)
        let now = MonotonicClock.nanoseconds()
        let deadline = Saturating.add(now, timeout.nanoseconds)
        do {
            return try await send(message, by: deadline, now: now)
        } catch FleetHTTPError.staleConnection {
            // Safe to repeat only where a repeat changes nothing.
            guard [.GET, .HEAD, .PUT, .DELETE].contains(method) else { throw FleetHTTPError.connectionClosed }
        } catch FleetHTTPError.closedBeforeSending {
            // Nothing went out: any request goes once more.
        }
        do {
            return try await send(message, by: deadline, now: MonotonicClock.nanoseconds())
        } catch FleetHTTPError.staleConnection, FleetHTTPError.closedBeforeSending {
            throw FleetHTTPError.connectionClosed
        }
    }

    /// One attempt: a connection, an idle one on the caller's event loop first (a request made on
    /// the loop its connection reads on is written and answered without waking another thread),
    /// then the exchange, in what is left of the deadline.
    private func send(_ message: HTTP1Request, by deadline: Int64, now: Int64) async throws -> HTTPAnswer {
        let here = EventLoopExecutor.current
        let loopID = here.map { ObjectIdentifier($0) }
        let (action, expired) = state.withLock { ($0.machine.request(preferring: loopID, deadline: deadline, now: now), $0.machine.takeExpired()) }
        close(expired)
        let connection: Connection
        var left = deadline - now
        if case .proceed(.use(let idle)) = action {
            connection = idle
        } else {
            connection = try await acquire(action, on: here, by: deadline)
            // The wait and the connect came out of the request's time.
            left = deadline - MonotonicClock.nanoseconds()
            guard left > 0 else {
                release(connection, keepAlive: nil)
                throw FleetHTTPError.timeout
            }
        }
        let request = Exchange.Request(message: message, timeout: .nanoseconds(left))
        return try await withUnsafeThrowingContinuation { continuation in
            connection.start(request, .task(continuation))
        }
    }

    /// Sends a request at once on an idle connection, one of `loop` first, with no task: `done`
    /// gets its answer on the connection's loop. False when no connection is idle: nothing was
    /// sent, and the caller sends the request with ``execute(_:_:headers:body:timeout:)``, which
    /// waits for one or connects. A keep-alive connection the server let go gives
    /// `staleConnection` here, which `execute` would have tried again for a GET.
    package func startIfIdle(
        _ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: ByteBuffer? = nil, timeout: Duration,
        preferring loop: any EventLoop, done: @escaping @Sendable (Result<HTTPAnswer, any Error>) -> Void
    ) throws -> Bool {
        let message = try HTTP1Request(method: method, target: path, host: hostHeader, headers: headers, body: body)
        let now = MonotonicClock.nanoseconds()
        let (idle, expired) = state.withLock { ($0.machine.requestIdle(preferring: ObjectIdentifier(loop), now: now), $0.machine.takeExpired()) }
        close(expired)
        guard let connection = idle else { return false }
        connection.start(Exchange.Request(message: message, timeout: .nanoseconds(timeout.nanoseconds)), .callback(done))
        return true
    }

    package func shutdown() async {
        let (connections, waiters, timer) = state.withLock { state in
            let action = state.machine.shutdown()
            let waiters = action.waiters.compactMap { state.waiters.removeValue(forKey: $0) }
            defer { state.timer = nil }
            return (action.close, waiters, state.timer)
        }
        timer?.cancel()
        for waiter in waiters { waiter.resume(returning: .fail(.shutDown)) }
        for connection in connections { try? await connection.channel.close() }
    }

    // MARK: Pool

    /// A connection for a request that found none idle: it opens one, at once or when a slot
    /// frees, or is handed one released while it waits.
    private func acquire(_ action: Pool.RequestAction, on here: (any EventLoop)?, by deadline: Int64) async throws -> Connection {
        let grant: Pool.Grant
        switch action {
        case .proceed(let granted): grant = granted
        case .wait(let id): grant = await wait(id, preferring: here.map { ObjectIdentifier($0) }, by: deadline)
        }
        switch grant {
        case .use(let connection): return connection
        case .connect(let ordinal): return try await connect(ordinal, on: here, by: deadline)
        case .fail(.timeout): throw FleetHTTPError.timeout
        case .fail(.cancelled): throw CancellationError()
        case .fail(.shutDown): throw FleetHTTPError.shutDown
        }
    }

    /// Parked until the pool hands over a connection or a slot, the deadline passes, the task is
    /// cancelled or the pool shuts down; resumed once, by whichever comes first.
    private func wait(_ id: Pool.WaiterID, preferring loop: ObjectIdentifier?, by deadline: Int64) async -> Pool.Grant {
        await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                let now = MonotonicClock.nanoseconds()
                let (action, expired) = state.withLock { state -> (Pool.ParkAction, [Connection]) in
                    // A cancellation before the park found no waiter to fail: its flag, set before
                    // the handler takes the lock, is seen here instead.
                    if Task.isCancelled { return (.proceed(.fail(.cancelled)), []) }
                    let action = state.machine.park(id, preferring: loop, deadline: deadline, now: now)
                    if case .parked = action { state.waiters[id] = continuation }
                    return (action, state.machine.takeExpired())
                }
                close(expired)
                switch action {
                case .proceed(let grant): continuation.resume(returning: grant)
                case .parked(let timer): if let timer { arm(timer) }
                }
            }
        } onCancel: {
            wake(state.withLock { state in
                let action = state.machine.cancel(id)
                return state.take(action)
            })
        }
    }

    /// Schedules the timer the machine armed; the one it replaces is cancelled.
    private func arm(_ timer: Pool.TimerArm) {
        let delay = TimeAmount.nanoseconds(max(0, timer.at - MonotonicClock.nanoseconds()))
        let scheduled = timerLoop.scheduleTask(in: delay) { self.deadlinesPassed(timer.generation) }
        let replaced = state.withLock { state -> Scheduled<Void>? in
            // Replaced by an earlier one, or fired already, before it could be kept.
            guard state.machine.timer?.generation == timer.generation else { return scheduled }
            defer { state.timer = scheduled }
            return state.timer
        }
        replaced?.cancel()
    }

    private func deadlinesPassed(_ generation: UInt64) {
        let now = MonotonicClock.nanoseconds()
        let (expired, next) = state.withLock { state in
            let action = state.machine.timerFired(generation: generation, now: now)
            return (action.expired.compactMap { state.waiters.removeValue(forKey: $0) }, action.arm)
        }
        if let next { arm(next) }
        for waiter in expired { waiter.resume(returning: .fail(.timeout)) }
    }

    /// Opens a connection, on `loop` when the caller runs on one, within the request's deadline.
    private func connect(_ ordinal: Int, on loop: (any EventLoop)?, by deadline: Int64) async throws -> Connection {
        let left = deadline - MonotonicClock.nanoseconds()
        guard left > 0 else {
            connectFailed()
            throw FleetHTTPError.timeout
        }
        let maxBody = maxBody
        var bootstrap = ClientBootstrap(group: loop ?? group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.nanoseconds(min(left, 10_000_000_000)))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Exchange(maxBody: maxBody))
                }
            }
        if !sourceAddresses.isEmpty {
            bootstrap = bootstrap.bind(to: sourceAddresses[ordinal % sourceAddresses.count])
        }
        do {
            let channel = try await bootstrap.connect(host: host, port: port).get()
            let connection = try await channel.eventLoop.submit {
                Connection(channel: channel, exchange: try channel.pipeline.syncOperations.handler(type: Exchange.self), pool: self)
            }.get()
            guard state.withLock({ $0.machine.opened(connection) }) else {
                channel.close(promise: nil)
                throw FleetHTTPError.shutDown
            }
            channel.closeFuture.whenComplete { _ in self.closed(connection) }
            return connection
        } catch {
            connectFailed()
            if let error = error as? FleetHTTPError { throw error }
            // The request's deadline cut the attempt short.
            if MonotonicClock.nanoseconds() >= deadline { throw FleetHTTPError.timeout }
            throw FleetHTTPError.connect(String(describing: error))
        }
    }

    /// Back to the pool after a complete keep-alive exchange; a waiting caller gets it first.
    /// `keepAlive`: the seconds the server said it keeps an idle connection, when it said.
    func release(_ connection: Connection, keepAlive: Int?) {
        let now = MonotonicClock.nanoseconds()
        let keepFor = keepAlive.map { Pool.keepFor(announced: $0) }
        wake(state.withLock { state in
            let action = state.machine.released(connection, now: now, keepFor: keepFor)
            return state.take(action)
        })
    }

    /// Idle connections kept past their time: closed unused (their slots were freed when found).
    private func close(_ expired: [Connection]) {
        for connection in expired { connection.channel.close(promise: nil) }
    }

    private func closed(_ connection: Connection) {
        let now = MonotonicClock.nanoseconds()
        wake(state.withLock { state in
            let action = state.machine.closed(connection, now: now)
            return state.take(action)
        })
    }

    private func connectFailed() {
        let now = MonotonicClock.nanoseconds()
        wake(state.withLock { state in
            let action = state.machine.connectFailed(now: now)
            return state.take(action)
        })
    }

    private func wake(_ woken: (UnsafeContinuation<Pool.Grant, Never>, Pool.Grant)?) {
        if let (continuation, grant) = woken { continuation.resume(returning: grant) }
    }
}

extension Connection: PooledConnection {}
