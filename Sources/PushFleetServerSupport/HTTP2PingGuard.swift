import NIOCore
import NIOHTTP2

/// Right after the HTTP/2 handler (which answers every PING with an ACK itself): enforces
/// ``PingRateState`` and keeps PINGs from Hummingbird's connection manager, whose own rule (one
/// PING in 30 s, closing on the fourth without flushing its GOAWAY) would cut off clients that
/// ping for liveness. A client over the rate gets GOAWAY (ENHANCE_YOUR_CALM, "too_many_pings"),
/// flushed before the close.
final class HTTP2PingGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private var state: PingRateState
    private var closing = false
    /// The highest stream the client opened, for GOAWAY's last-stream-ID.
    private var lastStream = HTTP2StreamID(0)

    init(interval: Duration, burst: Int) {
        state = PingRateState(interval: interval, burst: burst)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if frame.streamID > lastStream, Int32(frame.streamID) % 2 == 1 { lastStream = frame.streamID }
        guard case .ping(_, ack: false) = frame.payload else {
            context.fireChannelRead(data)
            return
        }
        guard !closing else { return }
        if !state.received(now: FirstRequestGuard.now()) {
            closing = true
            let goAway = HTTP2Frame(
                streamID: .rootStream,
                payload: .goAway(lastStreamID: lastStream, errorCode: .enhanceYourCalm, opaqueData: context.channel.allocator.buffer(string: "too_many_pings"))
            )
            let promise = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(goAway), promise: promise)
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            promise.futureResult.whenComplete { _ in loopBound.value.close(promise: nil) }
        }
    }

    /// Puts a guard right after the HTTP/2 handler of `channel`, when it has one.
    static func install(on channel: any Channel, limits: ServerLimits) throws {
        let pipeline = channel.pipeline.syncOperations
        guard let http2 = try? pipeline.handler(type: NIOHTTP2Handler.self) else { return }
        try pipeline.addHandler(HTTP2PingGuard(interval: limits.pingInterval, burst: limits.pingBurst), position: .after(http2))
    }
}
