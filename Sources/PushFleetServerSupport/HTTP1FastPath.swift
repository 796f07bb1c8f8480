import HTTPTypes
import NIOCore

/// Answers the HTTP/1.1 requests an ``EventLoopResponder`` takes straight from the connection's
/// bytes, ahead of the full pipeline (NIO's decoder, the conversion to `HTTPRequest`, the guards,
/// Hummingbird's connection handler): one scan of the head (``HTTP1RequestScan``), the answer
/// written as bytes, answers of a read flushed together. From the first request it does not
/// answer (another route, a form outside the scan's subset, a request sent in pieces, an upgrade)
/// it hands that request's bytes and the rest of the connection to the pipeline behind it, and
/// leaves. ``HTTP1FastPathState`` keeps the lifecycle.
///
/// For pipelines with no HTTP handler ahead of the first request (the WebSocket-upgrade
/// channel's): handlers that would keep their own timers during the answers here do not yet exist.
final class HTTP1FastPath: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let responder: any EventLoopResponder
    /// The server's register of stalled and quiet connections, for its connection cap.
    private let stalled: StalledConnections?
    private var state: HTTP1FastPathState
    /// Bytes read and not yet answered: part of a request, or requests behind one being answered.
    private var held: ByteBuffer?
    private var unflushed = false
    private var timer: Scheduled<Void>?

    init(responder: any EventLoopResponder, idleTimeout: Duration, stalled: StalledConnections? = nil) {
        self.responder = responder
        self.stalled = stalled
        self.state = HTTP1FastPathState(idleTimeout: idleTimeout)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if state.mode == .answering { endInner(context) }
        state.closed()
        cancelTimer()
        held = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state.mode == .answering else { return context.fireChannelRead(data) }
        var bytes = unwrapInboundIn(data)
        if held == nil {
            held = bytes
        } else {
            held!.writeBuffer(&bytes)
        }
        let now = FirstRequestGuard.now()
        if state.bytesArrived(now: now) { stalled?.ended(context.channel, quiet: true) }
        perform(state.firstBytes(now: now), context)
        answerHeld(context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if unflushed {
            unflushed = false
            context.flush()
        }
        switch state.readEnded(holdingPartialRequest: held != nil) {
        case .handOver: return handOver(context, readComplete: true)
        case .quietBegan: stalled?.began(context.channel, now: FirstRequestGuard.now(), quiet: true)
        default: break
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, state.mode == .answering {
            context.fireUserInboundEventTriggered(event)
            perform(state.quiesce(), context)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Answers the complete requests held, in order; stops at a partial one or hands over.
    private func answerHeld(_ context: ChannelHandlerContext) {
        while state.mode == .answering, let buffer = held {
            guard buffer.readableBytes > 0 else {
                held = nil
                return
            }
            let outcome = buffer.withUnsafeReadableBytes { HTTP1RequestScan.scan($0) }
            let head: HTTP1RequestScan.Head
            switch outcome {
            case .incomplete: return
            case .unsupported: return perform(state.handOver(), context)
            case .request(let scanned): head = scanned
            }
            guard let route = responder.route(for: head.request), head.contentLength <= route.bodyLimit else {
                return perform(state.handOver(), context)
            }
            let total = head.length + head.contentLength
            guard buffer.readableBytes >= total else { return }
            let body = buffer.getSlice(at: buffer.readerIndex + head.length, length: head.contentLength) ?? ByteBuffer()
            guard let answer = responder.respond(route, head: head.request, body: body, channel: context.channel) else {
                return perform(state.handOver(), context)
            }
            if buffer.readableBytes == total {
                held = nil
            } else {
                held!.moveReaderIndex(forwardBy: total)
            }
            context.write(NIOAny(Self.encode(answer, allocator: context.channel.allocator)), promise: nil)
            unflushed = true
            if head.closes {
                state.closed()
                unflushed = false
                context.flush()
                endInner(context)
                context.close(promise: nil)
                return
            }
        }
    }

    private func perform(_ action: HTTP1FastPathState.Action, _ context: ChannelHandlerContext) {
        switch action {
        case .none, .quietBegan:
            break
        case .armIdleTimer(let at):
            cancelTimer()
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(deadline: NIODeadline.uptimeNanoseconds(UInt64(max(0, at)))) {
                let (handler, context) = loopBound.value
                handler.timer = nil
                handler.perform(handler.state.idleTimerFired(now: FirstRequestGuard.now()), context)
            }
        case .close:
            cancelTimer()
            held = nil
            if unflushed {
                unflushed = false
                context.flush()
            }
            endInner(context)
            context.close(promise: nil)
        case .handOver:
            handOver(context, readComplete: false)
        }
    }

    /// This handler leaves the pipeline, and the held bytes go through it again from the socket
    /// end: ``FirstRequestGuard`` times and frames the inner pipeline's first request as a new
    /// connection's, and answers it 400 if the parser refuses it.
    private func handOver(_ context: ChannelHandlerContext, readComplete: Bool) {
        cancelTimer()
        if unflushed {
            unflushed = false
            context.flush()
        }
        let rest = held
        held = nil
        let pipeline = context.pipeline.syncOperations
        pipeline.fireUserInboundEventTriggered(FirstRequestGuard.InnerBegins())
        pipeline.removeHandler(context: context, promise: nil)
        if let rest, rest.readableBytes > 0 { pipeline.fireChannelRead(NIOAny(rest)) }
        if readComplete { pipeline.fireChannelReadComplete() }
    }

    /// Tells the pipeline behind, still waiting for its first request, that none will come:
    /// Hummingbird's WebSocket-upgrade channel ends quietly on it, where a plain close is logged
    /// as a failed upgrade.
    private func endInner(_ context: ChannelHandlerContext) {
        context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }

    /// The status line, the answer's fields and its `content-length`, and its body, in one buffer.
    static func encode(_ answer: CompleteResponse, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 128 + answer.body.readableBytes)
        if answer.status == .ok {
            buffer.writeStaticString("HTTP/1.1 200 OK\r\n")
        } else {
            buffer.writeStaticString("HTTP/1.1 ")
            buffer.writeString(String(answer.status.code))
            buffer.writeInteger(UInt8(ascii: " "))
            buffer.writeString(answer.status.reasonPhrase)
            buffer.writeStaticString("\r\n")
        }
        for field in answer.headers where field.name != .contentLength {
            buffer.writeString(field.name.rawName)
            buffer.writeStaticString(": ")
            buffer.writeString(field.value)
            buffer.writeStaticString("\r\n")
        }
        buffer.writeStaticString("content-length: ")
        buffer.writeString(String(answer.body.readableBytes))
        buffer.writeStaticString("\r\n\r\n")
        var body = answer.body
        buffer.writeBuffer(&body)
        return buffer
    }
}
