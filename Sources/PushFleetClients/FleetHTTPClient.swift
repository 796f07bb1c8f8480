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
    package var headers: HTTPHeaders = [:]
}

package enum FleetHTTPError: Error, Sendable, Equatable {
    case timeout
    case connectionClosed
    /// A reused keep-alive connection closed before any answer: the server had let it go idle.
    case staleConnection
    case connect(String)
    case bodyTooLarge
    case shutDown
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
        /// Idle connections by the event loop they read on.
        var idle: [ObjectIdentifier: [Connection]] = [:]
        var open = 0
        var connectsStarted = 0
        /// Callers waiting for a connection; resumed with one, or with nil when a slot frees.
        var waiters = CircularBuffer<UnsafeContinuation<Connection?, any Error>>()
        var all: [ObjectIdentifier: Connection] = [:]
        var shutDown = false

        /// An idle connection, one of `loop` first.
        mutating func takeIdle(preferring loop: (any EventLoop)?) -> Connection? {
            if let loop, let connection = idle[ObjectIdentifier(loop)]?.popLast() { return connection }
            guard let key = idle.first(where: { !$0.value.isEmpty })?.key else { return nil }
            return idle[key]?.popLast()
        }

        mutating func putIdle(_ connection: Connection) {
            idle[ObjectIdentifier(connection.channel.eventLoop), default: []].append(connection)
        }

        mutating func removeIdle(_ connection: Connection) {
            let key = ObjectIdentifier(connection.channel.eventLoop)
            if let index = idle[key]?.firstIndex(where: { $0 === connection }) { idle[key]?.remove(at: index) }
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
        self.hostHeader = port == 80 ? host : "\(host):\(port)"
    }

    package func execute(
        _ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: ByteBuffer? = nil, timeout: Duration
    ) async throws -> HTTPAnswer {
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
        head.headers.reserveCapacity(headers.count + 2)
        head.headers.add(name: "Host", value: hostHeader)
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        if let body {
            head.headers.add(name: "Content-Length", value: String(body.readableBytes))
        } else if method != .GET && method != .HEAD && method != .DELETE {
            head.headers.add(name: "Content-Length", value: "0")
        }
        let request = Exchange.Request(head: head, body: body, timeout: TimeAmount.nanoseconds(timeout.nanoseconds), maxBody: maxBody)
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
        var bootstrap = ClientBootstrap(group: loop ?? group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(leftOverBytesStrategy: .dropBytes)
                    try channel.pipeline.syncOperations.addHandler(Exchange())
                }
            }
        if !sourceAddresses.isEmpty {
            bootstrap = bootstrap.bind(to: sourceAddresses[ordinal % sourceAddresses.count])
        }
        do {
            let channel = try await bootstrap.connect(host: host, port: port).get()
            let exchange = try await channel.eventLoop.submit {
                NIOLoopBound(try channel.pipeline.syncOperations.handler(type: Exchange.self), eventLoop: channel.eventLoop)
            }.get()
            let connection = Connection(channel: channel, exchange: exchange, pool: self)
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
    fileprivate func release(_ connection: Connection) {
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

/// One pooled connection: its channel and the handler that runs its exchanges.
private final class Connection: Sendable {
    let channel: any Channel
    let exchange: NIOLoopBound<Exchange>
    let pool: FleetHTTPClient

    init(channel: any Channel, exchange: NIOLoopBound<Exchange>, pool: FleetHTTPClient) {
        self.channel = channel
        self.exchange = exchange
        self.pool = pool
    }

    func start(_ request: Exchange.Request, _ continuation: UnsafeContinuation<HTTPAnswer, any Error>) {
        if channel.eventLoop.inEventLoop {
            exchange.value.start(request, continuation, connection: self)
        } else {
            channel.eventLoop.execute { [exchange] in exchange.value.start(request, continuation, connection: self) }
        }
    }
}

/// Writes one request and gathers its answer; lives in the channel's pipeline.
private final class Exchange: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    struct Request: Sendable {
        var head: HTTPRequestHead
        var body: ByteBuffer?
        var timeout: TimeAmount
        var maxBody: Int
    }

    private var context: ChannelHandlerContext?
    private var continuation: UnsafeContinuation<HTTPAnswer, any Error>?
    private weak var connection: Connection?
    private var status = 0
    private var headers: HTTPHeaders = [:]
    private var keepAlive = true
    private var body: ByteBuffer?
    private var maxBody = 0
    private var timer: Scheduled<Void>?
    /// Exchanges this connection has completed, and whether the current one has an answer yet.
    private var completed = 0
    private var answered = false

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func start(_ request: Request, _ continuation: UnsafeContinuation<HTTPAnswer, any Error>, connection: Connection) {
        guard let context, context.channel.isActive, self.continuation == nil else {
            continuation.resume(throwing: completed > 0 ? FleetHTTPError.staleConnection : FleetHTTPError.connectionClosed)
            return
        }
        self.answered = false
        self.continuation = continuation
        self.connection = connection
        self.status = 0
        self.body = nil
        self.keepAlive = true
        self.maxBody = request.maxBody
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: request.timeout) { [self] in
            fail(FleetHTTPError.timeout)
            self.context?.close(promise: nil)
        }
        context.write(wrapOutboundOut(.head(request.head)), promise: nil)
        if let body = request.body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            answered = true
            status = Int(head.status.code)
            headers = head.headers
            keepAlive = head.isKeepAlive
        case .body(var part):
            if body == nil {
                body = part
            } else if body!.readableBytes + part.readableBytes > maxBody {
                fail(FleetHTTPError.bodyTooLarge)
                context.close(promise: nil)
            } else {
                body!.writeBuffer(&part)
            }
        case .end:
            guard let continuation else { return }
            self.continuation = nil
            completed += 1
            timer?.cancel()
            timer = nil
            let answer = HTTPAnswer(status: status, body: body ?? ByteBuffer(), headers: headers)
            headers = [:]
            body = nil
            if keepAlive, let connection {
                connection.pool.release(connection)
            } else {
                context.close(promise: nil)
            }
            continuation.resume(returning: answer)
        }
    }

    /// Why an open exchange failed when the connection went: a reused connection that gave no
    /// answer was let go by the server while idle.
    private var closedError: FleetHTTPError { completed > 0 && !answered ? .staleConnection : .connectionClosed }

    func channelInactive(context: ChannelHandlerContext) {
        fail(closedError)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(closedError)
        context.close(promise: nil)
    }

    private func fail(_ error: FleetHTTPError) {
        timer?.cancel()
        timer = nil
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(throwing: error)
    }
}
