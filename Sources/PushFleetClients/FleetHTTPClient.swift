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
    private let state = Mutex(PoolState())

    private struct PoolState {
        /// Idle connections by the event loop they read on: a list per loop, found by a scan
        /// (a group has a loop or a few per core).
        var idle: [(loop: ObjectIdentifier, connections: [Connection])] = []
        var open = 0
        var connectsStarted = 0
        /// Callers waiting for a connection; resumed with one, or with nil when a slot frees.
        var waiters = CircularBuffer<UnsafeContinuation<Connection?, any Error>>()
        var all: [ObjectIdentifier: Connection] = [:]
        var shutDown = false

        /// An idle connection, one of `loop` first.
        mutating func takeIdle(preferring loop: (any EventLoop)?) -> Connection? {
            if let loop, let list = idle.firstIndex(where: { $0.loop == ObjectIdentifier(loop) }),
                let connection = idle[list].connections.popLast()
            {
                return connection
            }
            guard let list = idle.firstIndex(where: { !$0.connections.isEmpty }) else { return nil }
            return idle[list].connections.popLast()
        }

        mutating func putIdle(_ connection: Connection) {
            if let list = idle.firstIndex(where: { $0.loop == connection.loopID }) {
                idle[list].connections.append(connection)
            } else {
                idle.append((connection.loopID, [connection]))
            }
        }

        mutating func removeIdle(_ connection: Connection) {
            guard let list = idle.firstIndex(where: { $0.loop == connection.loopID }),
                let index = idle[list].connections.firstIndex(where: { $0 === connection })
            else { return }
            idle[list].connections.remove(at: index)
        }
    }

    /// - Parameter sourceAddresses: local addresses to bind connections to in turn, so that one
    ///   origin can take more connections than one source address has ephemeral ports.
    package init(host: String, port: Int, maxConnections: Int, group: any EventLoopGroup, sourceAddresses: [SocketAddress] = []) {
        self.host = host
        self.port = port
        self.maxConnections = max(1, maxConnections)
        self.group = group
        self.sourceAddresses = sourceAddresses
        let bracketed = host.contains(":") ? "[\(host)]" : host
        self.hostHeader = port == 80 ? bracketed : "\(bracketed):\(port)"
    }

    package func execute(
        _ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: ByteBuffer? = nil, timeout: Duration
    ) async throws -> HTTPAnswer {
        let message = try HTTP1Request(method: method, target: path, host: hostHeader, headers: headers, body: body)
        let request = Exchange.Request(message: message, timeout: TimeAmount.nanoseconds(timeout.nanoseconds))
        do {
            return try await send(request)
        } catch FleetHTTPError.staleConnection {
            // Safe to repeat only where a repeat changes nothing.
            guard [.GET, .HEAD, .PUT, .DELETE].contains(method) else { throw FleetHTTPError.connectionClosed }
            do {
                return try await send(request)
            } catch FleetHTTPError.staleConnection {
                throw FleetHTTPError.connectionClosed
            }
        }
    }

    private func send(_ request: Exchange.Request) async throws -> HTTPAnswer {
        let connection = try await acquire()
        return try await withUnsafeThrowingContinuation { continuation in
            connection.start(request, continuation)
        }
    }

    package func shutdown() async {
        let (connections, waiters) = state.withLock { state in
            state.shutDown = true
            let waiters = Array(state.waiters)
            state.waiters.removeAll()
            return (Array(state.all.values), waiters)
        }
        for waiter in waiters { waiter.resume(throwing: FleetHTTPError.shutDown) }
        for connection in connections { try? await connection.channel.close() }
    }

    // MARK: Pool

    private enum Next {
        case use(Connection)
        case connect(Int)
        case wait
    }

    /// An idle connection, one on the caller's event loop first: a request made on the loop its
    /// connection reads on is written and answered without waking another thread.
    private func acquire() async throws -> Connection {
        let here = EventLoopExecutor.current
        while true {
            let next: Next = try state.withLock { state in
                if state.shutDown { throw FleetHTTPError.shutDown }
                if let connection = state.takeIdle(preferring: here) { return .use(connection) }
                if state.open < maxConnections {
                    state.open += 1
                    state.connectsStarted += 1
                    return .connect(state.connectsStarted)
                }
                return .wait
            }
            switch next {
            case .use(let connection): return connection
            case .connect(let ordinal): return try await connect(ordinal, on: here)
            case .wait:
                let handed: Connection? = try await withUnsafeThrowingContinuation { continuation in
                    let immediate: Next? = state.withLock { state in
                        if state.shutDown { return .wait }
                        if let connection = state.takeIdle(preferring: here) { return .use(connection) }
                        if state.open < maxConnections { return .connect(0) }
                        state.waiters.append(continuation)
                        return nil
                    }
                    switch immediate {
                    case .use(let connection): continuation.resume(returning: connection)
                    case .connect: continuation.resume(returning: nil)
                    case .wait: continuation.resume(throwing: FleetHTTPError.shutDown)
                    case nil: break
                    }
                }
                if let handed { return handed }
            }
        }
    }

    /// Opens a connection, on `loop` when the caller runs on one.
    private func connect(_ ordinal: Int, on loop: (any EventLoop)?) async throws -> Connection {
        let maxBody = maxBody
        var bootstrap = ClientBootstrap(group: loop ?? group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
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
            let accepted = state.withLock { state in
                guard !state.shutDown else { return false }
                state.all[ObjectIdentifier(connection)] = connection
                return true
            }
            guard accepted else {
                channel.close(promise: nil)
                throw FleetHTTPError.shutDown
            }
            channel.closeFuture.whenComplete { _ in self.closed(connection) }
            return connection
        } catch {
            freeSlot()
            if let error = error as? FleetHTTPError { throw error }
            throw FleetHTTPError.connect(String(describing: error))
        }
    }

    /// Back to the pool after a complete keep-alive exchange; a waiting caller gets it first.
    func release(_ connection: Connection) {
        let waiter: UnsafeContinuation<Connection?, any Error>? = state.withLock { state in
            if let waiter = state.waiters.popFirst() { return waiter }
            state.putIdle(connection)
            return nil
        }
        waiter?.resume(returning: connection)
    }

    private func closed(_ connection: Connection) {
        state.withLock { state in
            state.all[ObjectIdentifier(connection)] = nil
            state.removeIdle(connection)
        }
        freeSlot()
    }

    private func freeSlot() {
        let waiter: UnsafeContinuation<Connection?, any Error>? = state.withLock { state in
            state.open -= 1
            return state.waiters.popFirst()
        }
        waiter?.resume(returning: nil)
    }
}
