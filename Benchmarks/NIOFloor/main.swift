import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOPosix

// What NIO alone allows on the push service's request shapes, for `scripts/nio-floor`: HTTP/1.1
// answered by a handler after NIO's decoder and encoder, h2c answered at the connection's frames
// (no stream channels, as the push service answers provider streams), each "200, empty body",
// with no checks and no work; and h2c read frame by frame without NIO's HTTP/2 handler
// (H2FramesByHand); HTTP/1.1 read as bytes in a NIO channel without NIO's codec (H1BytesAnswer),
// and the same by a loop of its own on epoll, without NIO (OwnLoop).
// Usage: NIOFloor HTTP1_PORT H2C_PORT [H2C_BY_HAND_PORT [H1_BYTES_PORT OWN_LOOP_PORT]] (loopback).

final class H1Answer: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: "0")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.end(nil)), promise: nil)
    }
    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
}

final class H2FrameAnswer: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame
    var unacknowledged = 0
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let ended: Bool
        switch frame.payload {
        case .headers(let headers): ended = headers.endStream
        case .data(let data):
            ended = data.endStream
            // The connection's receive window, given back as it is used (no stream channels here).
            unacknowledged += data.data.readableBytes
            if unacknowledged >= 32_768 {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledged))), promise: nil)
                unacknowledged = 0
            }
        default: ended = false
        }
        guard ended else { return }
        let answer = HTTP2Frame.FramePayload.Headers(headers: [":status": "200", "content-length": "0"], endStream: true)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .headers(answer))), promise: nil)
    }
    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
}

let h1Port = Int(CommandLine.arguments[1])!
let h2Port = Int(CommandLine.arguments[2])!
let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
let h1 = try ServerBootstrap(group: group)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
            try channel.pipeline.syncOperations.addHandler(H1Answer())
        }
    }
    .bind(host: "127.0.0.1", port: h1Port).wait()
let h2 = try ServerBootstrap(group: group)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server))
            try channel.pipeline.syncOperations.addHandler(H2FrameAnswer())
        }
    }
    .bind(host: "127.0.0.1", port: h2Port).wait()
if CommandLine.arguments.count > 3, let byHandPort = Int(CommandLine.arguments[3]) {
    _ = try ServerBootstrap(group: group)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(H2FramesByHand()) }
        }
        .bind(host: "127.0.0.1", port: byHandPort).wait()
}
if CommandLine.arguments.count > 5, let bytesPort = Int(CommandLine.arguments[4]), let ownPort = Int(CommandLine.arguments[5]) {
    _ = try ServerBootstrap(group: group)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(H1BytesAnswer()) }
        }
        .bind(host: "127.0.0.1", port: bytesPort).wait()
    #if canImport(Glibc)
    try OwnLoop.serve(port: ownPort)
    #endif
}
print("nio-floor listening: h1 \(h1Port), h2c \(h2Port)")
_ = try h1.closeFuture.and(h2.closeFuture).wait()
