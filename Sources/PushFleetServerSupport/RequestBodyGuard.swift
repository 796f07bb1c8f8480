import HTTPTypes
public import HummingbirdCore
import NIOCore
import NIOHTTPTypes

/// After HTTP parsing, on an HTTP/1.1 connection or an HTTP/2 stream: enforces
/// ``BodyTimeoutState``. A refused body is answered (413 too large, 408 too slow) unless a
/// response has begun, and the connection (HTTP/1.1) or the stream (HTTP/2, which resets it) is
/// closed. Tells ``FirstRequestGuard`` when the client owes bytes, so that a full server can close
/// a stalled connection (``StalledConnections``): while a head or body arrives, and (as quiet)
/// on HTTP/1.1 while a kept-alive connection waits for its next request.
final class RequestBodyGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// From ``FirstRequestGuard``: a chunk over the size cap was declared.
    struct TooLarge {}

    /// Sent up the connection's pipeline to ``FirstRequestGuard``.
    enum Stall {
        case began
        case ended
        /// A kept-alive connection waits for its next request.
        case quietBegan
        case quietEnded
    }

    private var state: BodyTimeoutState
    private var timer: Scheduled<Void>?
    /// When the body timer is due, as the state last said. It is scheduled when the read ends,
    /// so a request read whole within one read (nearly every one) schedules and cancels none.
    private var due: Int64?
    /// The instant ``timer`` was scheduled for.
    private var scheduledFor: Int64?
    private let isHTTP2: Bool
    /// Parts of a refused request are dropped.
    private var refused = false
    private var responding = false
    private var upgraded = false
    private var stalled = false
    /// What ``FirstRequestGuard`` was last told of ``stalled``: told when the read ends, so a
    /// request read whole within one read costs no report.
    private var reportedStalled = false
    /// HTTP/1.1 between requests: the last answer ended and no new head came.
    private var idle = false
    /// The server is stopping: close once the answer in progress has ended.
    private var quiescing = false

    private let limits: ServerLimits
    /// An ``HTTP1FastPath`` lends this connection's requests: it is told when an answer ended.
    private let fastPathAhead: Bool

    init(limits: ServerLimits, isHTTP2: Bool, fastPathAhead: Bool = false) {
        self.limits = limits
        self.fastPathAhead = fastPathAhead
        state = BodyTimeoutState(bodyTimeout: limits.bodyTimeout, minRate: limits.minBodyRate, maxSize: limits.maxBodySize)
        self.isHTTP2 = isHTTP2
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let now = FirstRequestGuard.now()
        switch unwrapInboundIn(data) {
        case .head(let head):
            refused = false
            responding = false
            setIdle(false, context)
            setStalled(true, context)
            let length = head.headerFields[.contentLength].flatMap { Int($0) } ?? (head.headerFields[.contentLength] == nil ? nil : .max)
            let routeMax = limits.routeBodyLimits.isEmpty ? nil : limits.maxBody(method: head.method.rawValue, target: head.path ?? "")
            perform(state.head(now: now, declaredLength: length, routeMax: routeMax), context)
        case .body(let bytes):
            perform(state.body(now: now, bytes: bytes.readableBytes), context)
        case .end:
            setStalled(false, context)
            perform(state.end(), context)
        }
        if !refused { context.fireChannelRead(data) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reportStall(context)
        scheduleTimer(context)
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            responding = true
            if head.status == .switchingProtocols { upgraded = true }
        case .body:
            break
        case .end:
            // A kept-alive HTTP/1.1 connection now waits on its client.
            if !isHTTP2, !upgraded, !refused {
                setIdle(true, context)
            }
        }
        context.write(data, promise: promise)
        if fastPathAhead, case .end = unwrapOutboundIn(data) {
            context.triggerUserOutboundEvent(HTTP1FastPath.InnerAnswered(), promise: nil)
        }
        if quiescing, idle {
            context.flush()
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is StalledConnections.Evict:
            perform(.reject(status: 503), context)
            return
        case is TooLarge:
            perform(.reject(status: 413), context)
            return
        case is HTTP1FastPath.TakenBack:
            // The fast path keeps the connection's quiet phases from here.
            setIdle(false, context)
            return
        case is ChannelShouldQuiesceEvent where !isHTTP2 && !upgraded:
            // Hummingbird's WebSocket-upgrade channel leaves kept-alive connections open when
            // the server stops, which holds the stop until the client leaves.
            quiescing = true
            if idle {
                context.close(promise: nil)
                return
            }
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
        setStalled(false, context)
        reportStall(context)
        setIdle(false, context)
    }

    private func setIdle(_ value: Bool, _ context: ChannelHandlerContext) {
        guard value != idle else { return }
        idle = value
        // Only HTTP/1.1 connections are kept alive between requests here.
        context.channel.pipeline.fireUserInboundEventTriggered(value ? Stall.quietBegan : Stall.quietEnded)
    }

    private func setStalled(_ value: Bool, _ context: ChannelHandlerContext) {
        stalled = value
    }

    private func reportStall(_ context: ChannelHandlerContext) {
        guard stalled != reportedStalled else { return }
        reportedStalled = stalled
        let event: Stall = stalled ? .began : .ended
        // An HTTP/2 stream reports to its connection (an HTTP/1.1 connection's parent is the
        // listening socket).
        let connection = isHTTP2 ? (context.channel.parent ?? context.channel) : context.channel
        connection.pipeline.fireUserInboundEventTriggered(event)
    }

    private func perform(_ action: TimerAction, _ context: ChannelHandlerContext) {
        switch action {
        case .arm(let at):
            due = at
        case .disarm:
            cancelTimer()
        case .reject(let status):
            cancelTimer()
            refused = true
            setStalled(false, context)
            reportStall(context)
            if !responding {
                responding = true
                var head = HTTPResponse(status: .init(code: status))
                head.headerFields[.contentLength] = "0"
                if !isHTTP2 { head.headerFields[.connection] = "close" }
                context.write(wrapOutboundOut(.head(head)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
            context.close(promise: nil)
        case .close:
            cancelTimer()
            context.close(promise: nil)
        case .none:
            break
        }
    }

    /// Schedules the body timer for ``due`` unless it is scheduled for that instant already.
    private func scheduleTimer(_ context: ChannelHandlerContext) {
        guard let due, due != scheduledFor else { return }
        timer?.cancel()
        scheduledFor = due
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: NIODeadline.uptimeNanoseconds(UInt64(max(0, due)))) {
            let (handler, context) = loopBound.value
            handler.timer = nil
            handler.scheduledFor = nil
            handler.due = nil
            handler.perform(handler.state.timerFired(now: FirstRequestGuard.now()), context)
            handler.scheduleTimer(context)
        }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
        scheduledFor = nil
        due = nil
    }
}

extension ServerLimits {
    /// Hummingbird's HTTP/1.1 configuration for these limits; `routes` answers some requests on
    /// the event loop (``EventLoopResponder``).
    public func http1Configuration(routes: (any EventLoopResponder)? = nil, fastPathAhead: Bool = false) -> HTTP1Channel.Configuration {
        let limits = self
        return HTTP1Channel.Configuration(
            additionalChannelHandlers: [RequestBodyGuard(limits: limits, isHTTP2: false, fastPathAhead: fastPathAhead)]
                + (routes.map { [$0.installer()] } ?? []),
            // With ``HTTP1FastPath`` ahead, the idle timeout is its until it hands the connection over.
            idleTimeout: fastPathAhead ? nil : .nanoseconds(idleTimeout.saturatingNanoseconds)
        )
    }
}
