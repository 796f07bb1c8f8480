import HTTPTypes
import HummingbirdCore
import NIOCore
import NIOHTTPTypes

/// The channel handler that carries out ``EventLoopRoutesState``: it sits after Hummingbird's
/// connection-state handler, which so sees every request and answer, those answered here too, for
/// its idle timeout and its graceful stop (it closes after the answer in progress), just before
/// the router's channel.
final class EventLoopRoutes: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let responder: any EventLoopResponder
    private var state = EventLoopRoutesState()
    /// The route of the request held here.
    private var route: EventLoopRoute?

    init(responder: any EventLoopResponder) {
        self.responder = responder
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        guard !state.waits(part) else { return }
        let action: EventLoopRoutesState.Inbound
        switch part {
        case .head(let head):
            action = state.head(head) { head in
                guard let claimed = responder.route(for: head) else { return nil }
                route = claimed
                return claimed.bodyLimit
            }
        case .body(let bytes): action = state.body(bytes)
        case .end: action = state.end()
        }
        switch action {
        case .hold:
            break
        case .forward:
            context.fireChannelRead(data)
        case .answer(let head, let body):
            answer(head, body: body, context: context)
        }
    }

    func read(context: ChannelHandlerContext) {
        if state.read() { context.read() }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { state.routerAnswerEnded() }
        context.write(data, promise: promise)
    }

    private func answer(_ head: HTTPRequest, body: ByteBuffer?, context: ChannelHandlerContext) {
        let held = route
        route = nil
        if let held, let later = responder.respondLater(held, head: head, body: body, channel: context.channel) {
            state.answersLater()
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            later.hop(to: context.eventLoop).whenComplete { result in
                let (handler, context) = bound.value
                // The responder's futures do not fail; one that did gets a bare 500.
                handler.write((try? result.get()) ?? CompleteResponse(status: .internalServerError), for: head, context: context)
                handler.resume(context)
            }
            return
        }
        guard let held, let answer = responder.respond(held, head: head, body: body, channel: context.channel) else {
            state.handedOver()
            context.fireChannelRead(wrapInboundOut(.head(head)))
            if let read = state.lastBody, read.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(.body(read))) }
            context.fireChannelRead(wrapInboundOut(.end(nil)))
            return
        }
        write(answer, for: head, context: context)
    }

    private func write(_ answer: CompleteResponse, for head: HTTPRequest, context: ChannelHandlerContext) {
        var fields = answer.headers
        fields[.contentLength] = String(answer.body.readableBytes)
        context.write(wrapOutboundOut(.head(HTTPResponse(status: answer.status, headerFields: fields))), promise: nil)
        if answer.body.readableBytes > 0 { context.write(wrapOutboundOut(.body(answer.body)), promise: nil) }
        let closing = Self.asksToClose(head)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        if closing { context.close(promise: nil) }
    }

    /// The answer owed was written: the parts that waited for it are read, in order (one of them
    /// may begin another answer owed, behind which the rest wait again), and their read ended,
    /// since the router's channel hands on what it was given only then; then a read that waited.
    private func resume(_ context: ChannelHandlerContext) {
        let (parts, read) = state.answeredLater()
        guard !parts.isEmpty || read else { return }
        for part in parts { channelRead(context: context, data: wrapInboundOut(part)) }
        if !parts.isEmpty { context.fireChannelReadComplete() }
        if read, state.read() { context.read() }
    }

    /// `Connection: close` among the request's fields, as the router's loop reads it.
    private static func asksToClose(_ head: HTTPRequest) -> Bool {
        head.headerFields[values: .connection].contains { $0.lowercased().contains("close") }
    }

    /// Added among the HTTP handlers (after the codec, before Hummingbird's connection-state
    /// handler exists), it puts ``EventLoopRoutes`` after that handler at the first request, when
    /// the pipeline is complete.
    final class Installer: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPRequestPart
        typealias InboundOut = HTTPRequestPart

        private let responder: any EventLoopResponder
        private var installed = false

        init(responder: any EventLoopResponder) {
            self.responder = responder
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !installed else { return context.fireChannelRead(data) }
            installed = true
            let operations = context.pipeline.syncOperations
            if let connectionState = try? operations.handler(type: HTTPConnectionStateHandler.self) {
                try? operations.addHandler(EventLoopRoutes(responder: responder), position: .after(connectionState))
            }
            context.fireChannelRead(data)
            // Out of the way once its read has gone on.
            operations.removeHandler(context: context, promise: nil)
        }
    }
}
