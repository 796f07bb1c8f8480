import NIOCore
import NIOHTTP2

/// First of an HTTP/2 connection's handlers, before NIO's: carries out
/// ``HTTP2ConnectionFrontState``, answering the requests an ``EventLoopResponder`` claims from the
/// connection's bytes and passing every other byte on. It also keeps the connection's idle
/// timeout, since NIO's connection manager sees only the streams that reach NIO: a connection with
/// no stream open at NIO and no request answered here for that long gets GOAWAY (NO_ERROR) and is
/// closed.
final class HTTP2ConnectionFront: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let responder: any EventLoopResponder
    private let link: HTTP2FrontLink
    private var state = HTTP2ConnectionFrontState()
    private var idleTask: Scheduled<Void>?
    private var closing = false

    init(responder: any EventLoopResponder, link: HTTP2FrontLink) {
        self.responder = responder
        self.link = link
    }

    func handlerAdded(context: ChannelHandlerContext) {
        state = HTTP2ConnectionFrontState(allocator: context.channel.allocator)
        // The loop's clock: a test's embedded loop has its own.
        let now = context.eventLoop.now
        link.idle.active(now: now)
        scheduleIdleCheck(context, at: now + link.idle.timeout)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleTask?.cancel()
        idleTask = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleTask?.cancel()
        idleTask = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        state.receive(unwrapInboundIn(data))
        let answered = state.answeredCount
        let responder = responder
        while let event = state.next(claim: { responder.route(for: $0) }) {
            switch event {
            case .answer(let id, let route, let head, let body):
                // Frames before this request go to NIO first: one NIO refuses ends the connection
                // before anything after it is acted on (RFC 9113 §5.4.1).
                if state.forward.readableBytes > 0 {
                    send(context)
                    guard context.channel.isActive, !closing else { return }
                }
                guard let answer = responder.respond(route, head: head, body: body, channel: context.channel) else {
                    state.handOver(id)
                    continue
                }
                if !state.answered(id, answer) {
                    // A body: NIO's side writes it, under the client's flow-control windows.
                    link.answers[HTTP2StreamID(Int(id))] = answer
                    state.handOver(id)
                }
            case .fail:
                fail(context)
                return
            }
        }
        if state.failed { return fail(context) }
        if state.answeredCount != answered { link.idle.active(now: context.eventLoop.now) }
        send(context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard !closing else { return }
        state.readComplete()
        if state.failed { return fail(context) }
        send(context)
        context.flush()
        // An answer NIO's side did not take (its stream was refused there) is not kept.
        if !link.answers.isEmpty { link.answers.removeAll() }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // A stopping server: new streams go to NIO's handler, which refuses them after its GOAWAY.
        if event is ChannelShouldQuiesceEvent { state.claiming = false }
        context.fireUserInboundEventTriggered(event)
    }

    /// The client's bytes first (answers), then NIO's: an answer written here goes out before a
    /// SETTINGS acknowledgement NIO writes for a later frame of the same read.
    private func send(_ context: ChannelHandlerContext) {
        if state.output.readableBytes > 0 {
            context.write(wrapOutboundOut(state.output), promise: nil)
            state.output = context.channel.allocator.buffer(capacity: 0)
        }
        if state.forward.readableBytes > 0 {
            let forward = state.forward
            state.forward = context.channel.allocator.buffer(capacity: 0)
            context.fireChannelRead(wrapInboundOut(forward))
        }
    }

    private func fail(_ context: ChannelHandlerContext) {
        closing = true
        closeAfterOutput(context)
    }

    private func closeAfterOutput(_ context: ChannelHandlerContext) {
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(state.output), promise: promise)
        state.output = context.channel.allocator.buffer(capacity: 0)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        promise.futureResult.whenComplete { _ in bound.value.close(promise: nil) }
    }

    private func scheduleIdleCheck(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleTask = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            handler.idleCheck(context)
        }
    }

    private func idleCheck(_ context: ChannelHandlerContext) {
        idleTask = nil
        guard !closing, context.channel.isActive else { return }
        if let next = link.idle.check(now: context.eventLoop.now, openStreams: link.openStreams) { return scheduleIdleCheck(context, at: next) }
        closing = true
        state.goAway()
        closeAfterOutput(context)
    }
}
