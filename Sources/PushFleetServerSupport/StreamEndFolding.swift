public import HummingbirdCore
import NIOCore
import NIOHTTP2

/// Sends an HTTP/2 answer with END_STREAM on its last frame (``StreamEndFold``): on a stream
/// channel before the codec, where frames pass.
final class StreamEndFolding: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private var fold = StreamEndFold<EventLoopPromise<Void>?>(combine: StreamEndFolding.combine)

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let sends = fold.write(unwrapOutboundIn(data), promise)
        if let (payload, promise) = sends.first { context.write(wrapOutboundOut(payload), promise: promise) }
        if let (payload, promise) = sends.second { context.write(wrapOutboundOut(payload), promise: promise) }
    }

    func flush(context: ChannelHandlerContext) {
        if let (payload, promise) = fold.flush() { context.write(wrapOutboundOut(payload), promise: promise) }
        context.flush()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // The stream is going: nothing more will be folded into a held frame.
        if let (payload, held) = fold.flush() { context.writeAndFlush(wrapOutboundOut(payload), promise: held) }
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        fold.drop()??.fail(ChannelError.ioOnClosedChannel)
    }

    /// One promise for writes folded into one frame (most writes on a stream carry none).
    private static func combine(_ first: EventLoopPromise<Void>?, _ second: EventLoopPromise<Void>?) -> EventLoopPromise<Void>? {
        guard let first else { return second }
        guard let second else { return first }
        let both = first.futureResult.eventLoop.makePromise(of: Void.self)
        both.futureResult.cascade(to: first)
        both.futureResult.cascade(to: second)
        return both
    }

    /// Added among a stream's HTTP handlers (after the codec), it puts ``StreamEndFolding``
    /// before the codec, where frames pass.
    final class Installer: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny

        func handlerAdded(context: ChannelHandlerContext) {
            try? context.pipeline.syncOperations.addHandler(StreamEndFolding(), position: .first)
        }
    }
}

extension ServerLimits {
    /// The configuration of an HTTP/2 server's streams for these limits; `routes` answers some
    /// requests on the event loop (``EventLoopResponder``).
    public func http2StreamConfiguration(routes: (any EventLoopResponder)? = nil) -> HTTP1Channel.Configuration {
        let limits = self
        return HTTP1Channel.Configuration(
            additionalChannelHandlers: [StreamEndFolding.Installer(), RequestBodyGuard(limits: limits, isHTTP2: true)]
                + (routes.map { [$0.installer()] } ?? []),
            idleTimeout: .nanoseconds(idleTimeout.saturatingNanoseconds)
        )
    }
}
