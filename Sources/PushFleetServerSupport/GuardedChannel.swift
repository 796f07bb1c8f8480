public import HummingbirdCore
public import Logging
public import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Wraps a server child channel with ``FirstRequestGuard`` at the socket end of its pipeline, and
/// answers and closes a connection the inner channel left open (Hummingbird's WebSocket-upgrade
/// channel does that when the first request does not parse). With a registry, the connection is
/// tracked there while it is open (see ``ConnectionState``).
public struct GuardedChildChannel<Inner: ServerChildChannel>: ServerChildChannel {
    public typealias Value = Inner.Value
    let inner: Inner
    let headerTimeout: Duration
    let limits: ServerLimits?
    let stalled: StalledConnections?
    let connections: ConnectionRegistry?
    let isTLS: Bool
    /// Requests answered from the connection's bytes ahead of the inner pipeline
    /// (``HTTP1FastPath``).
    let fastRoutes: (any EventLoopResponder)?
    /// The fast path lends the requests it does not answer to the inner pipeline and takes the
    /// connection back after each answer (an inner ``HTTP1Channel`` made with
    /// `http1Configuration(routes:fastPathAhead: true)`).
    let lends: Bool

    public init(_ inner: Inner, headerTimeout: Duration, connections: ConnectionRegistry? = nil, isTLS: Bool = false) {
        self.inner = inner
        self.headerTimeout = headerTimeout
        self.limits = nil
        self.stalled = nil
        self.connections = connections
        self.isTLS = isTLS
        self.fastRoutes = nil
        self.lends = false
    }

    /// - Parameters:
    ///   - limits: the header timeout, and the PING rate of an HTTP/2 connection.
    ///   - cap: the server's connection cap, which may close this connection for room while it
    ///     is stalled.
    ///   - fastRoutes: HTTP/1.1 requests answered straight from the connection's bytes
    ///     (``HTTP1FastPath``), for an inner channel with no HTTP handler before its first request,
    ///   - lends: or for an inner ``HTTP1Channel`` without an idle timeout of its own, to which the
    ///     fast path lends the requests it does not answer, one at a time.
    public init(
        _ inner: Inner, limits: ServerLimits, cap: ConnectionCap?, connections: ConnectionRegistry? = nil, isTLS: Bool = false,
        fastRoutes: (any EventLoopResponder)? = nil, lends: Bool = false
    ) {
        self.inner = inner
        self.headerTimeout = limits.headerTimeout
        self.limits = limits
        self.stalled = cap?.stalled
        self.connections = connections
        self.isTLS = isTLS
        self.fastRoutes = fastRoutes
        self.lends = lends
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let headerTimeout = headerTimeout
        let stalled = stalled
        let limits = limits
        let fastRoutes = fastRoutes
        let isTLS = isTLS
        let lends = lends
        _ = connections?.register(channel, isTLS: isTLS)
        stalled?.register(channel)
        return channel.eventLoop.makeCompletedFuture {
            // A TLS channel puts its TLS handler before this one, so the guard sees plaintext.
            let guardHandler = FirstRequestGuard(
                headerTimeout: headerTimeout, maxBodySize: limits?.maxBodySize, routes: limits?.routeBodyLimits ?? [], stalled: stalled,
                fastPathAhead: fastRoutes != nil && limits != nil
            )
            try channel.pipeline.syncOperations.addHandler(guardHandler, position: .first)
            if let fastRoutes, let limits {
                let fastPath = { HTTP1FastPath(responder: fastRoutes, idleTimeout: limits.idleTimeout, stalled: stalled, lends: lends) }
                if isTLS {
                    // Over TLS the protocol is known only once the first bytes are decrypted.
                    guardHandler.pendingFastPath = fastPath
                } else {
                    try channel.pipeline.syncOperations.addHandler(fastPath(), position: .after(guardHandler))
                }
            }
        }.flatMap {
            inner.setup(channel: channel, logger: logger)
        }.flatMapThrowing { value in
            // h2c: the HTTP/2 handler is in place now (over TLS it comes after the handshake).
            if let limits { try HTTP2PingGuard.install(on: channel, limits: limits) }
            try channel.pipeline.syncOperations.addHandler(ParseErrorCatcher())
            return value
        }
    }

    public func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
        value.channel.pipeline.fireUserInboundEventTriggered(FirstRequestGuard.HandlerFinished())
    }
}

/// Raw bytes in, raw bytes out, first in the pipeline: enforces ``FirstRequestState``.
final class FirstRequestGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct HandlerFinished {}
    struct ParseFailed {}
    /// From ``HTTP1FastPath``: the inner pipeline takes the connection from the next bytes on;
    /// `since`, when the request handed over began to arrive in pieces (its head is owed within
    /// the header timeout from then).
    struct InnerBegins {
        var since: Int64?
    }

    private var state: FirstRequestState
    private var timer: Scheduled<Void>?
    private let stalled: StalledConnections?
    /// Reported to ``stalled``: the first head is incomplete; `quiet` while nothing of it was read.
    private var headPending = false
    private var headQuiet = false
    private var framing: RequestFramingState?
    /// The framing the inner pipeline's requests get once ``HTTP1FastPath`` hands over; until
    /// then the fast path reads every request itself.
    private var framingAfterHandOver: RequestFramingState?
    /// Over TLS: the fast path, made once ``TLSServerChannel`` knows the connection speaks
    /// HTTP/1.1 (``installFastPath(on:after:)``).
    fileprivate var pendingFastPath: (() -> HTTP1FastPath)?
    /// A request was refused here: the rest of the input is dropped.
    private var refused = false
    /// The server is stopping and this connection had sent no request.
    private var stopping = false

    init(
        headerTimeout: Duration, maxBodySize: Int? = nil, routes: [RouteBodyLimit] = [], stalled: StalledConnections? = nil,
        fastPathAhead: Bool = false
    ) {
        state = FirstRequestState(headerTimeout: headerTimeout)
        let framing = maxBodySize.map { RequestFramingState(maxBodySize: $0, routes: routes) }
        if fastPathAhead {
            framingAfterHandOver = framing
        } else {
            self.framing = framing
        }
        self.stalled = stalled
    }

    /// Over TLS, once the connection is known to speak HTTP/1.1: puts the fast path this guard
    /// holds after `handler` (the version sniff, which hands its held bytes on when it leaves).
    /// The guard frames requests from the hand-over on, as on a cleartext port; an HTTP/2
    /// connection has no HTTP/1.1 framing to follow.
    static func installFastPath(on pipeline: ChannelPipeline.SynchronousOperations, after handler: any ChannelHandler) throws {
        guard let guardHandler = try? pipeline.handler(type: FirstRequestGuard.self), let fastPath = guardHandler.pendingFastPath else {
            return
        }
        guardHandler.pendingFastPath = nil
        try pipeline.addHandler(fastPath(), position: .after(handler))
    }

    /// Where ``HTTP1FastPath`` hands the connection over: the bytes it held come through this
    /// guard again, as a new connection's first request, whatever lies before it (TLS).
    static func replay(
        in pipeline: ChannelPipeline.SynchronousOperations, _ bytes: ByteBuffer?, since: Int64? = nil, readComplete: Bool, inputClosed: Bool
    ) {
        guard let context = try? pipeline.context(handlerType: FirstRequestGuard.self), let guardHandler = context.handler as? FirstRequestGuard
        else {
            if let bytes, bytes.readableBytes > 0 { pipeline.fireChannelRead(NIOAny(bytes)) }
            if readComplete { pipeline.fireChannelReadComplete() }
            if inputClosed { pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
            return
        }
        guardHandler.userInboundEventTriggered(context: context, event: InnerBegins(since: since))
        if let bytes, bytes.readableBytes > 0 { guardHandler.channelRead(context: context, data: NIOAny(bytes)) }
        if readComplete { context.fireChannelReadComplete() }
        if inputClosed { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
    }

    static func now() -> Int64 { Int64(truncatingIfNeeded: NIODeadline.now().uptimeNanoseconds) }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { connected(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if timer == nil { connected(context) }
        context.fireChannelActive()
    }

    private func connected(_ context: ChannelHandlerContext) {
        let now = Self.now()
        if !headPending {
            headPending = true
            headQuiet = true
            stalled?.began(context.channel, now: now, quiet: true)
        }
        perform(state.connected(now: now), context)
    }

    /// The first bytes of the head were read: from now on the client owes the rest.
    private func headHeard(_ context: ChannelHandlerContext) {
        guard headPending, headQuiet else { return }
        headQuiet = false
        stalled?.ended(context.channel, quiet: true)
        stalled?.began(context.channel, now: Self.now())
    }

    private func headDone(_ context: ChannelHandlerContext) {
        guard headPending else { return }
        headPending = false
        stalled?.ended(context.channel, quiet: headQuiet)
        headQuiet = false
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        let buffer = unwrapInboundIn(data)
        if buffer.readableBytes > 0 { headHeard(context) }
        perform(state.received(buffer.readableBytesView), context)
        if !state.awaitingHead { headDone(context) }
        if var framing, !framing.isOff {
            let verdict = buffer.withUnsafeReadableBytes { framing.received($0) }
            self.framing = framing
            if case .tooLarge(let prefix) = verdict {
                // The head (if in this read) goes on to be parsed, the chunk does not; the body
                // guard after the parser answers 413 unless a response has begun.
                refused = true
                if prefix > 0, let head = buffer.getSlice(at: buffer.readerIndex, length: prefix) {
                    context.fireChannelRead(wrapInboundOut(head))
                }
                context.fireUserInboundEventTriggered(RequestBodyGuard.TooLarge())
                context.close(promise: nil)
                return
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        state.wrote()
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        // First: a kept-alive connection sends these on every request.
        case let stall as RequestBodyGuard.Stall:
            switch stall {
            case .began: stalled?.began(context.channel, now: Self.now())
            case .ended: stalled?.ended(context.channel)
            case .quietBegan: stalled?.began(context.channel, now: Self.now(), quiet: true)
            case .quietEnded: stalled?.ended(context.channel, quiet: true)
            }
        case is HandlerFinished:
            if stopping {
                context.close(promise: nil)
            } else if context.channel.isActive {
                perform(state.handlerFinished(), context)
            }
        case is ParseFailed:
            if context.channel.isActive { perform(state.parseFailed(now: Self.now()), context) }
        case let begins as InnerBegins:
            // The bytes from here on come through this handler again, from the socket end.
            framing = framingAfterHandOver
            framingAfterHandOver = nil
            guard context.channel.isActive else { return }
            let now = Self.now()
            perform(state.innerBegins(now: min(now, begins.since ?? now)), context)
            if !headPending {
                headPending = true
                headQuiet = true
                stalled?.began(context.channel, now: now, quiet: true)
            }
        case is ChannelShouldQuiesceEvent where state.awaitingHead:
            // The server is stopping and this connection never sent a request. Hummingbird's
            // WebSocket-upgrade channel and an HTTP/2 connection without its preface would wait
            // for one: end the input, which each closes on quietly (a close from here would be
            // logged as a failed upgrade), once the handlers that take the event have had it.
            stopping = true
            context.fireUserInboundEventTriggered(event)
            if context.channel.isActive { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        case is StalledConnections.Evict:
            guard context.channel.isActive else { return }
            if state.awaitingHead {
                perform(.reject(status: 503), context)
            } else {
                // An HTTP/1.1 request answers 503 itself (RequestBodyGuard); then close.
                context.fireUserInboundEventTriggered(event)
                context.close(promise: nil)
            }
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func perform(_ action: TimerAction, _ context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .arm(let at):
            timer?.cancel()
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(deadline: NIODeadline.uptimeNanoseconds(UInt64(max(0, at)))) {
                let (handler, context) = loopBound.value
                handler.timer = nil
                handler.perform(handler.state.timerFired(now: Self.now()), context)
            }
        case .disarm:
            timer?.cancel()
            timer = nil
        case .reject(let status):
            timer?.cancel()
            timer = nil
            headDone(context)
            if !state.answered {
                state.wrote()
                let reason = status == 408 ? "Request Timeout" : status == 503 ? "Service Unavailable" : "Bad Request"
                let text = "HTTP/1.1 \(status) \(reason)\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
                context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: text)), promise: nil)
            }
            context.close(promise: nil)
        case .close:
            context.close(promise: nil)
        }
    }
}

/// Last in the pipeline: tells ``FirstRequestGuard`` of a request the HTTP parser refused that
/// no handler before it answered (Hummingbird's WebSocket-upgrade channel leaves those unanswered
/// while the upgrade is being negotiated).
final class ParseErrorCatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError {
            context.channel.pipeline.fireUserInboundEventTriggered(FirstRequestGuard.ParseFailed())
        }
        context.fireErrorCaught(error)
    }
}

extension ServerLimits {
    /// Stops accepting past ``maxConnections``; the rest wait in the backlog. Without the room
    /// for clients that are not stalled that ``connectionCap()`` keeps.
    public var connectionsDelegate: MaximumAvailableConnections {
        MaximumAvailableConnections(maxConnections ?? Self.defaultMaxConnections())
    }
}
