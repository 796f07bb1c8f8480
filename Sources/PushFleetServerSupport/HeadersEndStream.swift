public import HummingbirdCore
import NIOCore
import NIOHPACK
import NIOHTTP2

/// HTTP/2 answers without a body end the stream on their HEADERS frame, as APNs's do.
///
/// The HTTP/2 codec sends such an answer as HEADERS and then an empty DATA frame that ends the
/// stream. That is valid HTTP/2, but some clients read every DATA frame of an APNs answer as
/// its JSON error body (aioapns fails on the empty one and resends on a new connection). This
/// handler, on a stream channel before the codec, holds a response's HEADERS until the next
/// write: an empty DATA frame that ends the stream is folded into them; anything else follows
/// them.
final class HeadersEndStream: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private var held: (headers: HTTP2Frame.FramePayload.Headers, promise: EventLoopPromise<Void>?)?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let payload = unwrapOutboundIn(data)
        if let held {
            self.held = nil
            if case .data(let frame) = payload, frame.endStream, frame.data.readableBytes == 0 {
                var headers = held.headers
                headers.endStream = true
                context.write(wrapOutboundOut(.headers(headers)), promise: Self.combine(held.promise, promise, on: context.eventLoop))
                return
            }
            context.write(wrapOutboundOut(.headers(held.headers)), promise: held.promise)
        }
        // Informational (1xx) heads are sent as they come; a final head waits for what follows.
        if case .headers(let headers) = payload, !headers.endStream, headers.headers.first(name: ":status")?.first != "1" {
            held = (headers, promise)
            return
        }
        context.write(data, promise: promise)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        release(context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        held?.promise?.fail(ChannelError.ioOnClosedChannel)
        held = nil
    }

    /// Sends held headers on (the stream is going: nothing more will be folded into them).
    private func release(_ context: ChannelHandlerContext) {
        guard let held else { return }
        self.held = nil
        context.writeAndFlush(wrapOutboundOut(.headers(held.headers)), promise: held.promise)
    }

    private static func combine(_ first: EventLoopPromise<Void>?, _ second: EventLoopPromise<Void>?, on loop: any EventLoop)
        -> EventLoopPromise<Void>?
    {
        guard let first else { return second }
        guard let second else { return first }
        let both = loop.makePromise(of: Void.self)
        both.futureResult.cascade(to: first)
        both.futureResult.cascade(to: second)
        return both
    }

    /// Added among a stream's HTTP handlers (after the codec), it puts ``HeadersEndStream``
    /// before the codec, where frames pass.
    final class Installer: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny

        func handlerAdded(context: ChannelHandlerContext) {
            try? context.pipeline.syncOperations.addHandler(HeadersEndStream(), position: .first)
        }
    }
}

extension ServerLimits {
    /// The configuration of an HTTP/2 server's streams for these limits; `routes` answers some
    /// requests on the event loop (``EventLoopResponder``).
    public func http2StreamConfiguration(routes: (any EventLoopResponder)? = nil) -> HTTP1Channel.Configuration {
        let limits = self
        return HTTP1Channel.Configuration(
            additionalChannelHandlers: [HeadersEndStream.Installer(), RequestBodyGuard(limits: limits, isHTTP2: true)]
                + (routes.map { [$0.installer()] } ?? []),
            idleTimeout: .nanoseconds(idleTimeout.saturatingNanoseconds)
        )
    }
}
