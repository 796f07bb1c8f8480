import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore

/// Answers the HTTP/1.1 requests an ``EventLoopResponder`` takes straight from the connection's
/// bytes, ahead of the full pipeline (NIO's decoder, the conversion to `HTTPRequest`, the guards,
/// Hummingbird's connection handler): one scan of the head (``HTTP1RequestScan``), the answer
/// written as bytes, answers of a read flushed together. A request it does not answer (another
/// route) goes behind, when it ``lends``: that request's bytes alone, and the connection comes back
/// once the pipeline's answer is written (``InnerAnswered``). A request whose bytes span reads is
/// held while it arrives quickly. From the first request it cannot frame (a form outside the
/// scan's subset, a request still in pieces past its grace, an upgrade), or the first it does not
/// answer when it does not lend, it hands that request's bytes and the rest of the connection to
/// the pipeline behind, and leaves. ``HTTP1FastPathState`` keeps the lifecycle.
///
/// The pipeline behind keeps no idle timer of its own while this handler is in it (it would see
/// no requests and close a busy connection): when it ``lends``, Hummingbird's connection-state
/// handler is given the idle timeout when the connection is handed over for good.
final class HTTP1FastPath: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    /// Sent toward the socket by ``RequestBodyGuard`` when the pipeline behind wrote an answer's end.
    struct InnerAnswered {}
    /// Sent to the pipeline behind when the connection comes back: its quiet phase is over.
    struct TakenBack {}

    private let responder: any EventLoopResponder
    /// The server's register of stalled and quiet connections, for its connection cap.
    private let stalled: StalledConnections?
    private let lends: Bool
    /// The idle timeout Hummingbird's connection-state handler gets at a hand-over for good.
    private let innerIdleTimeout: Duration?
    private var state: HTTP1FastPathState
    /// Bytes read and not yet answered: part of a request, or requests behind one being answered.
    private var held: ByteBuffer?
    /// The previous head's field lines: most come again unchanged.
    private var memo = HTTP1RequestScan.LineMemo()
    private var unflushed = false
    private var timer: Scheduled<Void>?
    private var partialTimer: Scheduled<Void>?
    /// A read the pipeline asked for while an answer was owed or lent and bytes waited.
    private var readPending = false
    /// Within `channelRead`: a `channelReadComplete` follows.
    private var inRead = false

    init(responder: any EventLoopResponder, idleTimeout: Duration, stalled: StalledConnections? = nil, lends: Bool = false) {
        self.responder = responder
        self.stalled = stalled
        self.lends = lends
        self.innerIdleTimeout = lends ? idleTimeout : nil
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
        switch state.mode {
        case .handedOver, .closed: return context.fireChannelRead(data)
        case .answering, .owing, .lending: break
        }
        var bytes = unwrapInboundIn(data)
        let now = FirstRequestGuard.now()
        if state.bytesArrived(now: now) { stalled?.ended(context.channel, quiet: true) }
        perform(state.firstBytes(now: now), context)
        inRead = true
        defer { inRead = false }
        // The rest of a lent request's body goes behind as it comes.
        let remaining = state.lentRemaining
        if remaining > 0 {
            let count = min(remaining, bytes.readableBytes)
            if let part = bytes.readSlice(length: count) { context.fireChannelRead(wrapInboundOut(part)) }
            perform(state.forwarded(count, now: now), context)
            guard bytes.readableBytes > 0 else { return }
            switch state.mode {
            case .answering, .owing, .lending: break
            case .closed: return
            // Handed over while answering what waited: these bytes follow the ones replayed.
            case .handedOver: return context.pipeline.syncOperations.fireChannelRead(NIOAny(bytes))
            }
        }
        if held == nil {
            held = bytes
        } else {
            held!.writeBuffer(&bytes)
        }
        answerHeld(context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if unflushed {
            unflushed = false
            context.flush()
        }
        let partial = held != nil
        switch state.readEnded(holdingPartialRequest: partial, now: partial ? FirstRequestGuard.now() : 0) {
        case .handOver: return handOver(context, readComplete: true)
        case .quietBegan: stalled?.began(context.channel, now: FirstRequestGuard.now(), quiet: true)
        case let action: perform(action, context)
        }
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        if holdsReads {
            readPending = true
        } else {
            context.read()
        }
    }

    /// While an answer is owed or a request lent, the connection reads on until bytes wait behind
    /// it (one read's worth at most): a read stopped and started again costs two `epoll_ctl`
    /// calls, and a client seldom sends more before its answer.
    private var holdsReads: Bool {
        switch state.mode {
        case .owing, .lending: held != nil
        default: false
        }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is InnerAnswered else { return context.triggerUserOutboundEvent(event, promise: promise) }
        promise?.succeed()
        guard state.innerAnswered(now: FirstRequestGuard.now()) == .resume else { return }
        context.fireUserInboundEventTriggered(TakenBack())
        // Not from within the pipeline's write of its answer: the requests that waited are
        // answered, or lent, once that call has returned.
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            handler.resume(context, takeBack: false)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let end = event as? ChannelEvent, end == .inputClosed {
            if state.inputEnded() { context.fireUserInboundEventTriggered(event) }
            return
        }
        guard event is ChannelShouldQuiesceEvent else { return context.fireUserInboundEventTriggered(event) }
        switch state.mode {
        case .answering:
            context.fireUserInboundEventTriggered(event)
            perform(state.quiesce(), context)
        case .owing, .lending:
            perform(state.quiesce(), context)
        case .handedOver, .closed:
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Answers the complete requests held, in order; stops at a partial one, at an answer owed or
    /// a request lent, or hands over.
    private func answerHeld(_ context: ChannelHandlerContext) {
        let channel = context.channel
        while state.mode == .answering, let buffer = held {
            guard buffer.readableBytes > 0 else {
                held = nil
                return
            }
            let outcome = buffer.withUnsafeReadableBytes { HTTP1RequestScan.scan($0, memo: &memo) }
            let head: HTTP1RequestScan.Head
            switch outcome {
            case .incomplete: return
            case .unsupported: return perform(state.handOver(), context)
            case .request(let scanned): head = scanned
            }
            let total = head.length + head.contentLength
            guard let route = responder.route(for: head.request), head.contentLength <= route.bodyLimit else {
                return lendOrHandOver(total, context)
            }
            guard buffer.readableBytes >= total else { return }
            let body = buffer.getSlice(at: buffer.readerIndex + head.length, length: head.contentLength) ?? ByteBuffer()
            if let later = responder.respondLater(route, head: head.request, body: body, channel: channel) {
                consume(total)
                state.owe()
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                let closes = head.closes
                later.hop(to: context.eventLoop).whenComplete { result in
                    let (handler, context) = bound.value
                    // The responder's futures do not fail; one that did gets a bare 500.
                    handler.owedAnswer((try? result.get()) ?? CompleteResponse(status: .internalServerError), closes: closes, context)
                }
                return
            }
            guard let answer = responder.respond(route, head: head.request, body: body, channel: channel) else {
                return lendOrHandOver(total, context)
            }
            consume(total)
            if !write(answer, closes: head.closes, context) { return }
        }
    }

    /// Drops a request's bytes from those held.
    private func consume(_ count: Int) {
        state.requestEnded()
        if held!.readableBytes == count {
            held = nil
        } else {
            held!.moveReaderIndex(forwardBy: count)
        }
    }

    /// Writes an answer; false when the request asked to close, and the connection is closing.
    private func write(_ answer: CompleteResponse, closes: Bool, _ context: ChannelHandlerContext) -> Bool {
        context.write(NIOAny(Self.encode(answer, allocator: context.channel.allocator)), promise: nil)
        unflushed = true
        guard closes else { return true }
        state.closed()
        unflushed = false
        context.flush()
        endInner(context)
        context.close(promise: nil)
        return false
    }

    private func owedAnswer(_ answer: CompleteResponse, closes: Bool, _ context: ChannelHandlerContext) {
        guard state.mode == .owing, context.channel.isActive else { return }
        guard write(answer, closes: closes, context) else { return }
        unflushed = false
        context.flush()
        switch state.owedAnswerWritten(now: FirstRequestGuard.now()) {
        case .resume: resume(context, takeBack: false)
        case let action: perform(action, context)
        }
        // Handed over, the end went behind with the bytes replayed.
        if state.mode != .handedOver, state.releaseInputEnd() { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
    }

    /// A request this handler does not answer, of `length` bytes: lent to the pipeline behind
    /// (its bytes so far, the rest as they come), or, when this handler does not lend, the
    /// connection handed over.
    private func lendOrHandOver(_ length: Int, _ context: ChannelHandlerContext) {
        guard lends else { return perform(state.handOver(), context) }
        if unflushed {
            unflushed = false
            context.flush()
        }
        let available = min(length, held!.readableBytes)
        let part = held!.readSlice(length: available)!
        if held!.readableBytes == 0 { held = nil }
        state.lend(length: length, forwarded: available)
        context.fireChannelRead(wrapInboundOut(part))
        // NIO's async channel hands on what it was given when the read ends.
        if !inRead { context.fireChannelReadComplete() }
    }

    private func perform(_ action: HTTP1FastPathState.Action, _ context: ChannelHandlerContext) {
        switch action {
        case .none, .quietBegan:
            break
        case .armPartialTimer(let at):
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            partialTimer = context.eventLoop.scheduleTask(deadline: NIODeadline.uptimeNanoseconds(UInt64(max(0, at)))) {
                let (handler, context) = loopBound.value
                handler.partialTimer = nil
                handler.perform(handler.state.partialTimerFired(now: FirstRequestGuard.now()), context)
            }
        case .armIdleTimer(let at):
            timer?.cancel()
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
            // Outside a read (after an answer owed or lent), the read the replayed bytes belong
            // to is ended here: NIO's async channel hands on what it was given only then.
            handOver(context, readComplete: !inRead)
        case .passQuiesce:
            context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        case .resume:
            // Back from lending, as the pipeline behind read the rest of a request it answered.
            resume(context, takeBack: true)
        }
    }

    /// The connection is back: from lending, the pipeline behind ends its quiet phase (this
    /// handler keeps them now); the requests that waited are answered, and a read that waited is
    /// made.
    private func resume(_ context: ChannelHandlerContext, takeBack: Bool) {
        guard state.mode == .answering else { return }
        if takeBack { context.fireUserInboundEventTriggered(TakenBack()) }
        answerHeld(context)
        if unflushed {
            unflushed = false
            context.flush()
        }
        if state.mode == .answering, held == nil, state.resumedIdle() == .quietBegan {
            stalled?.began(context.channel, now: FirstRequestGuard.now(), quiet: true)
        }
        if held != nil, !inRead {
            // A request in pieces waited: its grace begins, as at the end of a read.
            perform(state.readEnded(holdingPartialRequest: true, now: FirstRequestGuard.now()), context)
        }
        if readPending, state.mode != .closed, !holdsReads {
            readPending = false
            context.read()
        }
    }

    /// This handler leaves the pipeline, and the held bytes go through ``FirstRequestGuard`` again
    /// (after TLS, when the connection has it): the guard times and frames the inner pipeline's
    /// first request as a new connection's, and answers it 400 if the parser refuses it.
    private func handOver(_ context: ChannelHandlerContext, readComplete: Bool) {
        cancelTimer()
        if unflushed {
            unflushed = false
            context.flush()
        }
        let rest = held
        held = nil
        let pipeline = context.pipeline.syncOperations
        if let innerIdleTimeout, let connectionState = try? pipeline.handler(type: HTTPConnectionStateHandler.self) {
            // Hummingbird's idle timeout, kept here until now, goes to its connection handler.
            let timed = HTTPConnectionStateHandler(idleTimeout: innerIdleTimeout, logger: Self.logger)
            try? pipeline.addHandler(timed, position: .after(connectionState))
            pipeline.removeHandler(connectionState, promise: nil)
        }
        pipeline.removeHandler(context: context, promise: nil)
        if readPending {
            // From the channel's end: this handler's context has left the pipeline.
            readPending = false
            context.channel.read()
        }
        FirstRequestGuard.replay(
            in: pipeline, rest, since: state.partialSince, readComplete: readComplete, inputClosed: state.releaseInputEnd()
        )
    }

    private static let logger = Logger(label: "pushfleet.http1")

    /// Tells the pipeline behind, still waiting for its first request, that none will come:
    /// Hummingbird's WebSocket-upgrade channel ends quietly on it, where a plain close is logged
    /// as a failed upgrade.
    private func endInner(_ context: ChannelHandlerContext) {
        context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
        partialTimer?.cancel()
        partialTimer = nil
    }
}
