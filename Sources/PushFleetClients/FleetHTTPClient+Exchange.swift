import NIOCore
import NIOHTTP1

/// One pooled connection: its channel and the handler that runs its exchanges.
final class Connection: Sendable {
    let channel: any Channel
    let loop: any EventLoop
    /// The loop's identity, by which the pool keeps idle connections.
    let loopID: ObjectIdentifier
    /// Touched only on `loop` (`start` hops there first); held without `NIOLoopBound` so that a
    /// request made on the loop checks the thread once, not twice.
    private nonisolated(unsafe) let exchange: Exchange
    let pool: FleetHTTPClient

    init(channel: any Channel, exchange: Exchange, pool: FleetHTTPClient) {
        self.channel = channel
        self.loop = channel.eventLoop
        self.loopID = ObjectIdentifier(channel.eventLoop)
        self.exchange = exchange
        self.pool = pool
    }

    func start(_ request: Exchange.Request, _ reply: Exchange.Reply) {
        if loop.inEventLoop {
            exchange.start(request, reply, connection: self)
        } else {
            loop.execute { self.exchange.start(request, reply, connection: self) }
        }
    }
}

/// Writes one request and reads its answer with `HTTP1ResponseParser`; the only handler in the
/// connection's pipeline.
final class Exchange: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Request: Sendable {
        var message: HTTP1Request
        var timeout: TimeAmount
    }

    /// Who gets the answer: a task waiting for it, or a callback on the connection's loop.
    enum Reply: Sendable {
        case task(UnsafeContinuation<HTTPAnswer, any Error>)
        case callback(@Sendable (Result<HTTPAnswer, any Error>) -> Void)

        func resume(_ result: Result<HTTPAnswer, any Error>) {
            switch self {
            case .task(let continuation): continuation.resume(with: result)
            case .callback(let done): done(result)
            }
        }
    }

    private var context: ChannelHandlerContext?
    /// Until the channel goes inactive; read instead of asking the channel on every request.
    private var open = true
    private var continuation: Reply?
    /// The connection of the exchange in progress, held only while it is (the connection holds
    /// this handler), so that a whole answer hands it back to the pool.
    private var connection: Connection?
    private var parser: HTTP1ResponseParser
    /// When the exchange in progress times out.
    private var deadline = NIODeadline.distantFuture
    /// One timer per connection, armed at most once per timeout rather than once per request:
    /// when it fires before the exchange's deadline it is armed again for that deadline.
    private var timer: Scheduled<Void>?
    private var timerAt = NIODeadline.distantFuture
    /// Exchanges this connection has completed.
    private var completed = 0

    init(maxBody: Int) {
        parser = HTTP1ResponseParser(maxBody: maxBody)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        open = false
        connection = nil
        disarm()
    }

    func start(_ request: Request, _ continuation: Reply, connection: Connection) {
        guard let context, open, self.continuation == nil else {
            continuation.resume(.failure(FleetHTTPError.closedBeforeSending))
            return
        }
        self.continuation = continuation
        self.connection = connection
        parser.expect(body: request.message.expectsBody)
        deadline = .now() + request.timeout
        if timer == nil || deadline < timerAt { arm(at: deadline, context: context) }
        context.writeAndFlush(wrapOutboundOut(request.message.bytes), promise: nil)
    }

    private func arm(at instant: NIODeadline, context: ChannelHandlerContext) {
        timer?.cancel()
        timerAt = instant
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: instant) { [self] in
            timer = nil
            guard continuation != nil else { return }
            if deadline <= .now() {
                fail(FleetHTTPError.timeout)
                self.context?.close(promise: nil)
            } else if let context = self.context {
                arm(at: deadline, context: context)
            }
        }
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        guard continuation != nil else {
            // Nothing was asked: anything but stray line ends means the connection is out of step.
            if !HTTP1ResponseParser.onlyLineEnds(bytes.readableBytesView) { context.close(promise: nil) }
            return
        }
        let response: HTTP1Response?
        do {
            response = try parser.feed(&bytes)
        } catch {
            fail(error)
            context.close(promise: nil)
            return
        }
        if let response { complete(response, context: context) }
    }

    private func complete(_ response: HTTP1Response, context: ChannelHandlerContext) {
        guard let continuation else { return }
        self.continuation = nil
        completed += 1
        deadline = .distantFuture
        let answer = HTTPAnswer(status: response.status, body: response.body, fields: response.fields)
        let connection = self.connection.take()
        // Bytes past the answer were not asked for: the connection is not reused.
        if response.keepAlive, parser.leftover.isEmpty, let connection {
            connection.pool.release(connection, keepAlive: response.keepAliveTimeout)
        } else {
            context.close(promise: nil)
        }
        continuation.resume(.success(answer))
    }

    /// Why an open exchange failed when the connection went: a reused connection that gave no
    /// answer was let go by the server while idle.
    private var closedError: FleetHTTPError {
        completed > 0 && !parser.started ? .staleConnection : .connectionClosed
    }

    func channelInactive(context: ChannelHandlerContext) {
        open = false
        if continuation != nil {
            // An answer whose body runs to the close is whole now.
            if let response = try? parser.end() {
                complete(response, context: context)
            } else {
                fail(closedError)
            }
        }
        disarm()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(closedError)
        context.close(promise: nil)
    }

    private func fail(_ error: HTTP1ParseError) {
        switch error {
        case .bodyTooLarge: fail(FleetHTTPError.bodyTooLarge)
        case .headTooLarge: fail(FleetHTTPError.malformedAnswer("head too large"))
        case .malformed(let why): fail(FleetHTTPError.malformedAnswer(why))
        case .truncated: fail(closedError)
        }
    }

    private func fail(_ error: FleetHTTPError) {
        guard let continuation else { return }
        self.continuation = nil
        connection = nil
        deadline = .distantFuture
        continuation.resume(.failure(error))
    }
}
