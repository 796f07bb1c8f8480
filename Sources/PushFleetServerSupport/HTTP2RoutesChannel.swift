import HTTPTypes
public import HummingbirdCore
public import Logging
public import NIOCore
import NIOHTTP2
public import NIOHTTPTypes
import NIOHTTPTypesHTTP2

/// An HTTP/2 server connection whose hot requests are answered at its frames (``HTTP2FrameRoutes``)
/// and whose other streams each get a child channel and a task that runs the router, as
/// Hummingbird's `HTTP2Channel` gives every stream.
///
/// The connection is set up here rather than by Hummingbird so that handlers can sit before the
/// stream multiplexer: with routes, first the connection's front (``HTTP2ConnectionFront``, which
/// answers what it can from the bytes, before NIO, and keeps the idle timeout), then NIO's
/// connection handler, then its server connection manager (without routes the idle timeout; the
/// GOAWAYs of a graceful stop), then the frame routes, which also judge every request's
/// header block and close a stopping or half-closed connection once no stream is open
/// (``HTTP2ConnectionEndState``; ``HTTP2ConnectionEnd`` does it alone without routes), then the
/// multiplexer.
public struct HTTP2RoutesChannel: HTTPChannelHandler {
    public typealias Stream = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    public struct Value: ServerChildChannelValue {
        let streams: AsyncStream<Stream>
        public let channel: any Channel
    }

    public let responder: HTTPChannelHandler.Responder
    let routes: (any EventLoopResponder)?
    let limits: ServerLimits

    /// - Parameters:
    ///   - routes: requests answered at the connection's frames; nil gives every stream a channel.
    ///   - limits: the idle timeout, and the body cap and timeouts of the stream channels.
    public init(responder: @escaping HTTPChannelHandler.Responder, routes: (any EventLoopResponder)?, limits: ServerLimits) {
        self.responder = responder
        self.routes = routes
        self.limits = limits
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let streamConfiguration = limits.http2StreamConfiguration(routes: routes)
        let idle = TimeAmount.nanoseconds(limits.idleTimeout.saturatingNanoseconds)
        let routes = routes
        return channel.eventLoop.makeCompletedFuture {
            let (streams, continuation) = AsyncStream.makeStream(of: Stream.self)
            let pipeline = channel.pipeline.syncOperations
            // With routes, the front answers what it can from the bytes and keeps the idle
            // timeout, which NIO's manager would judge from the streams that reach NIO alone.
            let link = routes.map { _ in HTTP2FrontLink(idleTimeout: idle, now: channel.eventLoop.now) }
            if let routes, let link {
                // Answers written at the front wait for the client's reads: no more is read while
                // the socket cannot take them.
                try pipeline.addHandler(BackPressureHandler())
                try pipeline.addHandler(HTTP2ConnectionFront(responder: routes, link: link))
            }
            // With frame routes, request blocks are judged there (HTTP2HeaderBlockRules), once;
            // NIO's own validation would judge them again and every answer the service writes.
            try pipeline.addHandler(NIOHTTP2Handler(mode: .server, headerBlockValidation: routes == nil ? .enabled : .disabled))
            try pipeline.addHandler(
                NIOHTTP2ServerConnectionManagementHandler(
                    eventLoop: channel.eventLoop,
                    configuration: .init(maxIdleTime: link == nil ? idle : nil, maxAge: nil, maxGraceTime: nil, keepalive: nil)
                )
            )
            // The frame routes keep the connection's end themselves.
            if let routes { try pipeline.addHandler(routes.frameRoutes(link: link)) } else { try pipeline.addHandler(HTTP2ConnectionEnd()) }
            let multiplexer = HTTP2StreamMultiplexer(mode: .server, channel: channel, inboundStreamInitializer: { stream in
                stream.eventLoop.makeCompletedFuture {
                    let handlers = stream.pipeline.syncOperations
                    try handlers.addHandler(HTTP2FramePayloadToHTTPServerCodec())
                    try handlers.addHandlers(streamConfiguration.additionalChannelHandlers())
                    try handlers.addHandler(HTTPConnectionStateHandler(idleTimeout: streamConfiguration.idleTimeout.map { .nanoseconds($0.nanoseconds) }, logger: logger))
                    continuation.yield(try Stream(wrappingChannelSynchronously: stream))
                }
            })
            try pipeline.addHandler(multiplexer)
            channel.closeFuture.whenComplete { _ in continuation.finish() }
            return Value(streams: streams, channel: channel)
        }
    }

    public func handle(value: Value, logger: Logger) async {
        await withDiscardingTaskGroup { group in
            for await stream in value.streams {
                group.addTask { await handleHTTP(asyncChannel: stream, logger: logger) }
            }
        }
    }
}
