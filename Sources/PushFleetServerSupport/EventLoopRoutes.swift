public import HTTPTypes
import HummingbirdCore
public import NIOCore
import NIOHTTPTypes

/// Requests a server answers on the event loop that read them, without the router's task: the
/// hot provider requests of the push service. Anything else, and any request whose answer needs
/// asynchronous work after all, goes on to the router unchanged.
public protocol EventLoopResponder: Sendable {
    /// The route of a request this responder may answer, with the most body bytes to read for
    /// it; nil leaves the request to the router.
    func route(for head: HTTPRequest) -> EventLoopRoute?

    /// The answer to a request whose body was read (nil: longer than its limit); nil leaves the
    /// request to the router.
    func respond(_ route: EventLoopRoute, head: HTTPRequest, body: ByteBuffer?, channel: any Channel) -> CompleteResponse?
}

/// What a head told about its request, kept until its body is read: the head is read once.
/// Concrete rather than the responder's own type, so the handlers that hold it are not generic:
/// a generic handler, called by NIO through its protocols, looks its types' metadata up at run
/// time on every frame.
public struct EventLoopRoute: Sendable {
    /// Which of the responder's routes, in its own numbering.
    public var kind: Int
    /// The part of the path the route names (a device token, a project).
    public var parameter: Substring
    /// The most body bytes to read.
    public var bodyLimit: Int

    public init(kind: Int, parameter: Substring, bodyLimit: Int) {
        self.kind = kind
        self.parameter = parameter
        self.bodyLimit = bodyLimit
    }
}

extension EventLoopResponder {
    /// The handler that installs these routes on a connection or stream.
    func installer() -> any RemovableChannelHandler { EventLoopRoutes.Installer(responder: self) }
}

/// A response known whole, head and body: written at once on the event loop, or handed to the
/// router as a `Response`.
public struct CompleteResponse: Sendable {
    public var status: HTTPResponse.Status
    public var headers: HTTPFields
    public var body: ByteBuffer

    public init(status: HTTPResponse.Status, headers: HTTPFields = [:], body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// What ``EventLoopRoutes`` does with each request part, without a channel: a pure machine.
///
/// Answers keep their requests' order: a request is answered here only when no request handed to
/// the router is still waiting for its answer, and one answered here is answered when its last
/// part arrives, before the next request's first.
package struct EventLoopRoutesState: Sendable {
    package enum Inbound: Equatable, Sendable {
        /// Keep the part: it belongs to a request answered here.
        case hold
        /// Pass the part on to the router.
        case forward
        /// The request answered here is complete: answer it.
        case answer(head: HTTPRequest, body: ByteBuffer?)
    }

    private struct Collecting {
        var head: HTTPRequest
        var body: ByteBuffer?
        var limit: Int
        var tooLarge = false
    }

    private var collecting: Collecting?

    package init() {}
    /// Requests handed to the router whose answers have not ended.
    package private(set) var forwarded = 0

    package mutating func head(_ head: HTTPRequest, bodyLimit: (HTTPRequest) -> Int?) -> Inbound {
        if forwarded == 0, let limit = bodyLimit(head) {
            collecting = Collecting(head: head, limit: limit)
            return .hold
        }
        forwarded += 1
        return .forward
    }

    package mutating func body(_ bytes: ByteBuffer) -> Inbound {
        guard var request = collecting else { return .forward }
        collecting = nil
        if !request.tooLarge {
            if request.body == nil {
                request.body = bytes
            } else {
                var bytes = bytes
                request.body!.writeBuffer(&bytes)
            }
            if request.body!.readableBytes > request.limit {
                // Past the limit: only enough is kept to show it, should the router read it.
                request.tooLarge = true
                request.body = request.body!.getSlice(at: request.body!.readerIndex, length: request.limit + 1)
            }
        }
        collecting = request
        return .hold
    }

    package mutating func end() -> Inbound {
        guard let request = collecting else { return .forward }
        collecting = nil
        lastBody = request.body
        return .answer(head: request.head, body: request.tooLarge ? nil : (request.body ?? ByteBuffer()))
    }

    /// The body of the request last answered (``Inbound/answer(head:body:)``) as it was read: past
    /// its limit, the limit and one byte more. What the router is given if the request is handed
    /// over, so that it too finds a body too large.
    package private(set) var lastBody: ByteBuffer?

    /// An answer the router wrote ended.
    package mutating func routerAnswerEnded() {
        forwarded = max(0, forwarded - 1)
    }

    /// A request held here goes to the router after all (its answer needs asynchronous work).
    package mutating func handedOver() {
        forwarded += 1
    }

}

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
        let action: EventLoopRoutesState.Inbound
        switch unwrapInboundIn(data) {
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

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { state.routerAnswerEnded() }
        context.write(data, promise: promise)
    }

    private func answer(_ head: HTTPRequest, body: ByteBuffer?, context: ChannelHandlerContext) {
        let held = route
        route = nil
        guard let held, let answer = responder.respond(held, head: head, body: body, channel: context.channel) else {
            state.handedOver()
            context.fireChannelRead(wrapInboundOut(.head(head)))
            if let read = state.lastBody, read.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(.body(read))) }
            context.fireChannelRead(wrapInboundOut(.end(nil)))
            return
        }
        var fields = answer.headers
        fields[.contentLength] = String(answer.body.readableBytes)
        context.write(wrapOutboundOut(.head(HTTPResponse(status: answer.status, headerFields: fields))), promise: nil)
        if answer.body.readableBytes > 0 { context.write(wrapOutboundOut(.body(answer.body)), promise: nil) }
        let closing = Self.asksToClose(head)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        if closing { context.close(promise: nil) }
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
