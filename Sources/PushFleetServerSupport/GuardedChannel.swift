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
    let connections: ConnectionRegistry?
    let isTLS: Bool

    public init(_ inner: Inner, headerTimeout: Duration, connections: ConnectionRegistry? = nil, isTLS: Bool = false) {
        self.inner = inner
        self.headerTimeout = headerTimeout
        self.connections = connections
        self.isTLS = isTLS
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let headerTimeout = headerTimeout
        _ = connections?.register(channel, isTLS: isTLS)
        return channel.eventLoop.makeCompletedFuture {
            // A TLS channel puts its TLS handler before this one, so the guard sees plaintext.
            try channel.pipeline.syncOperations.addHandler(FirstRequestGuard(headerTimeout: headerTimeout), position: .first)
        }.flatMap {
            inner.setup(channel: channel, logger: logger)
        }.flatMapThrowing { value in
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

    private var state: FirstRequestState
    private var timer: Scheduled<Void>?

    init(headerTimeout: Duration) {
        state = FirstRequestState(headerTimeout: headerTimeout)
    }

    static func now() -> Int64 { Int64(truncatingIfNeeded: NIODeadline.now().uptimeNanoseconds) }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { perform(state.connected(now: Self.now()), context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if timer == nil { perform(state.connected(now: Self.now()), context) }
        context.fireChannelActive()
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
        let buffer = unwrapInboundIn(data)
        perform(state.received(buffer.readableBytesView), context)
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        state.wrote()
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is HandlerFinished:
            if context.channel.isActive { perform(state.handlerFinished(), context) }
        case is ParseFailed:
            if context.channel.isActive { perform(state.parseFailed(now: Self.now()), context) }
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
            if !state.answered {
                state.wrote()
                let reason = status == 408 ? "Request Timeout" : "Bad Request"
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

/// After HTTP parsing: enforces ``BodyTimeoutState``, closing a connection whose request body
/// stalls.
final class BodyTimeoutHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private var state: BodyTimeoutState
    private var timer: Scheduled<Void>?

    init(bodyTimeout: Duration) {
        state = BodyTimeoutState(bodyTimeout: bodyTimeout)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let now = FirstRequestGuard.now()
        switch unwrapInboundIn(data) {
        case .head: perform(state.head(now: now), context)
        case .body: perform(state.body(now: now), context)
        case .end: perform(state.end(), context)
        }
        context.fireChannelRead(data)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    private func perform(_ action: TimerAction, _ context: ChannelHandlerContext) {
        switch action {
        case .arm(let at):
            timer?.cancel()
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(deadline: NIODeadline.uptimeNanoseconds(UInt64(max(0, at)))) {
                let (handler, context) = loopBound.value
                handler.timer = nil
                handler.perform(handler.state.timerFired(now: FirstRequestGuard.now()), context)
            }
        case .disarm:
            timer?.cancel()
            timer = nil
        case .close, .reject:
            timer?.cancel()
            timer = nil
            context.close(promise: nil)
        case .none:
            break
        }
    }
}

extension ServerLimits {
    /// Hummingbird's HTTP/1.1 configuration for these limits.
    public func http1Configuration() -> HTTP1Channel.Configuration {
        let bodyTimeout = bodyTimeout
        return HTTP1Channel.Configuration(
            additionalChannelHandlers: [BodyTimeoutHandler(bodyTimeout: bodyTimeout)],
            idleTimeout: .nanoseconds(idleTimeout.saturatingNanoseconds)
        )
    }

    /// Stops accepting past ``maxConnections``; the rest wait in the backlog.
    public var connectionsDelegate: MaximumAvailableConnections {
        MaximumAvailableConnections(maxConnections ?? Self.defaultMaxConnections())
    }
}
