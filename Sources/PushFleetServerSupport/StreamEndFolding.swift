public import HummingbirdCore
import NIOCore
import NIOHTTP2

/// Sends an HTTP/2 answer with END_STREAM on its last frame (``StreamEndFold``): on a stream
/// channel before the codec, where frames pass.
final class StreamEndFolding: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private var fold = StreamEndFold<EventLoopPromise<Void>?>()

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        for (payload, promises) in fold.write(unwrapOutboundIn(data), promise) {
            context.write(wrapOutboundOut(payload), promise: Self.combine(promises, on: context.eventLoop))
        }
    }

    func flush(context: ChannelHandlerContext) {
        if let (payload, promises) = fold.flush() {
            context.write(wrapOutboundOut(payload), promise: Self.combine(promises, on: context.eventLoop))
        }
        context.flush()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // The stream is going: nothing more will be folded into a held frame.
        if let (payload, promises) = fold.flush() {
            context.writeAndFlush(wrapOutboundOut(payload), promise: Self.combine(promises, on: context.eventLoop))
        }
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        for promise in fold.drop() { promise?.fail(ChannelError.ioOnClosedChannel) }
    }

    private static func combine(_ promises: [EventLoopPromise<Void>?], on loop: any EventLoop) -> EventLoopPromise<Void>? {
        let present = promises.compactMap { $0 }
        guard present.count > 1 else { return present.first }
        let all = loop.makePromise(of: Void.self)
        for promise in present { all.futureResult.cascade(to: promise) }
        return all
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
