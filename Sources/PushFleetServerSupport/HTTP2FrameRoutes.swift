import HTTPTypes
import NIOCore
import NIOHPACK
import NIOHTTP2

/// On an HTTP/2 connection, between the connection's handlers and the stream multiplexer: answers
/// the requests an ``EventLoopResponder`` takes at the connection's frames, with no stream channel,
/// pipeline or task per request, and passes every other stream on untouched. The rules are
/// ``HTTP2FrameRoutesState``'s; this handler only carries them out.
///
/// A stream's child channel and its pipeline were most of an HTTP/2 provider request's cost
/// (docs/performance-servers.md).
final class HTTP2FrameRoutes: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// What is held for a stream, replayed in order if it is handed over.
    enum Item {
        case frame(HTTP2Frame)
        case event(Any)
    }

    private let responder: any EventLoopResponder
    private var state = HTTP2FrameRoutesState<EventLoopRoute, Item>()
    /// The connection's end, kept here rather than by a handler of its own (``HTTP2ConnectionEnd``
    /// without frame routes): one handler fewer for every frame and every stream's events.
    private var end = HTTP2ConnectionEndState()
    private var flushPending = false
    /// Shared with the connection's front, when it has one.
    private let link: HTTP2FrontLink?

    init(responder: any EventLoopResponder, link: HTTP2FrontLink?) {
        self.responder = responder
        self.link = link
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        guard id != .rootStream else { return context.fireChannelRead(data) }
        let action: HTTP2FrameRoutesState<EventLoopRoute, Item>.Inbound
        switch frame.payload {
        case .headers(let headers):
            if headers.endStream { end.clientEnded(Int(id)) }
            let block = headers.headers
            let isValid = { (trailers: Bool) in
                trailers ? HTTP2HeaderBlockRules.isValidTrailers(block) : HTTP2HeaderBlockRules.isValidRequest(block)
            }
            action = state.headers(id, endStream: headers.endStream, item: .frame(frame), isValid: isValid) {
                guard let head = HTTPRequest(http2: headers.headers), let claimed = responder.route(for: head) else { return nil }
                return (claimed, head, claimed.bodyLimit)
            }
        case .data(let body):
            if body.endStream { end.clientEnded(Int(id)) }
            guard case .byteBuffer(let bytes) = body.data else { return context.fireChannelRead(data) }
            action = state.data(id, bytes, endStream: body.endStream, item: .frame(frame))
        case .rstStream:
            action = state.otherFrame(id, isReset: true)
        case .windowUpdate:
            action = state.otherFrame(id, isReset: false)
        default:
            action = .forward
        }
        perform(action, data, context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.fireErrorCaught(error)
        if HTTP2ConnectionEndState.endsConnection(error) { context.close(promise: nil) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        let action: HTTP2FrameRoutesState<EventLoopRoute, Item>.Inbound
        var close = false
        switch event {
        case let closed as StreamClosedEvent:
            close = end.streamClosed(Int(closed.streamID))
            action = state.closed(closed.streamID)
            if let link {
                link.openStreams = max(0, link.openStreams - 1)
                if link.openStreams == 0 { link.idle.active(now: context.eventLoop.now) }
            }
        case let created as NIOHTTP2StreamCreatedEvent:
            end.streamOpened(Int(created.streamID))
            link?.openStreams += 1
            action = state.event(created.streamID, item: .event(event))
        case let window as NIOHTTP2WindowUpdatedEvent where window.streamID != .rootStream:
            action = state.event(window.streamID, item: .event(event))
        case is ChannelShouldQuiesceEvent:
            close = end.end(inputClosed: false)
            action = .forward
        case let channelEvent as ChannelEvent where channelEvent == .inputClosed:
            close = end.end(inputClosed: true)
            action = .forward
        default:
            action = .forward
        }
        switch action {
        case .forward: context.fireUserInboundEventTriggered(event)
        case .hold, .drop, .answer, .replay, .reset: break
        }
        if close {
            // After the event has gone on: a stream's last frames, or the GOAWAY, go out first.
            context.flush()
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        replay(state.readComplete(), context)
        if flushPending {
            flushPending = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    private func perform(_ action: HTTP2FrameRoutesState<EventLoopRoute, Item>.Inbound, _ data: NIOAny, _ context: ChannelHandlerContext) {
        switch action {
        case .forward:
            context.fireChannelRead(data)
        case .hold, .drop:
            break
        case .replay(let items):
            replay(items, context)
        case .reset(let id):
            // A malformed request is a stream error (RFC 9113 §8.1.1), as NIO's validation made it.
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.protocolError))), promise: nil)
            flushPending = true
        case .answer(let id, let route, let head, let body):
            // An answer decided at the connection's front is written here, under flow control.
            let decided = link?.answers.removeValue(forKey: id)
            guard let answer = decided ?? responder.respond(route, head: head, body: body, channel: context.channel) else {
                replay(state.handOver(id), context)
                return
            }
            state.answered(id)
            write(answer, on: id, context)
        }
    }

    private func replay(_ items: [Item], _ context: ChannelHandlerContext) {
        for item in items {
            switch item {
            case .frame(let frame): context.fireChannelRead(wrapInboundOut(frame))
            case .event(let event): context.fireUserInboundEventTriggered(event)
            }
        }
    }

    /// The answer in one HEADERS frame, or HEADERS and one DATA frame; the last ends the stream.
    /// Flushed when the read completes, with the rest of the read's answers.
    private func write(_ answer: CompleteResponse, on id: HTTP2StreamID, _ context: ChannelHandlerContext) {
        var fields = HPACKHeaders()
        fields.reserveCapacity(answer.headers.count + 2)
        fields.add(name: ":status", value: String(answer.status.code))
        // Not indexed: an answer's fields are most often unique to it (APNs's `apns-id`), and
        // each would take the dynamic table's room, evict an entry and be looked up there for nothing.
        for field in answer.headers where field.name != .contentLength {
            fields.add(name: field.name.canonicalName, value: field.value, indexing: .nonIndexable)
        }
        fields.add(name: "content-length", value: String(answer.body.readableBytes), indexing: .nonIndexable)
        let hasBody = answer.body.readableBytes > 0
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: fields, endStream: !hasBody)))), promise: nil)
        if hasBody {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(answer.body), endStream: true)))), promise: nil)
        }
        flushPending = true
    }
}

extension EventLoopResponder {
    /// The handler that answers these routes at an HTTP/2 connection's frames.
    func frameRoutes(link: HTTP2FrontLink?) -> any ChannelHandler { HTTP2FrameRoutes(responder: self, link: link) }
}
