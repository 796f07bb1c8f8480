import Foundation
package import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import PushFleetCore
import PushFleetWire

package enum GatewaySocketError: Error, Sendable, Equatable {
    case refused(UInt)
    /// The push service holds all the device sockets it takes: a 503 whose JSON body is
    /// `{"reason":"AtCapacity","cap":N}`.
    case atCapacity(cap: Int)
    case closed
    case timeout
}

/// A device's own WebSocket to the push gateway, driven by NIO callbacks.
///
/// No task is parked per connection: the socket lives in its channel's pipeline, frames arrive
/// in the read callback and go straight to `onInbound`. That, NIO's WebSocket codec and a
/// small receive buffer are what keep 15,000 sockets within a few KB each.
package final class GatewaySocket: Sendable {
    package let channel: any Channel

    private init(channel: any Channel) { self.channel = channel }

    /// Connects, upgrades to WebSocket and waits for the gateway's `subscribed` notice; pushes
    /// held for the device arrive through `onInbound` before it.
    package static func open(
        host: String,
        port: Int,
        uri: String,
        group: any EventLoopGroup,
        source: SocketAddress?,
        timeout: Duration,
        onInbound: @escaping @Sendable (GatewayInbound, Int64) -> Void
    ) async throws -> GatewaySocket {
        let loop = group.next()
        let ready = loop.makePromise(of: Void.self)
        let hostHeader = "\(host):\(port)"
        var bootstrap = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            // NIO keeps a channel's last receive buffer for the next read, so its size is paid
            // by every idle device; a push frame larger than 256 bytes takes a few reads.
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 256))
            .connectTimeout(.nanoseconds(timeout.nanoseconds))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // A protocol error closes the socket (GatewayFrames.errorCaught): one handler
                    // fewer on every device's pipeline than NIO's automatic close-frame answer.
                    let upgrader = NIOWebSocketClientUpgrader(maxFrameSize: maxGatewayFrame, automaticErrorHandling: false) { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            let operations = channel.pipeline.syncOperations
                            try operations.addHandler(GatewayFrames(ready: ready, onInbound: onInbound))
                            if let request = try? operations.handler(type: UpgradeRequest.self) {
                                operations.removeHandler(request, promise: nil)
                            }
                        }
                    }
                    // Frames sent right behind the 101 answer arrive in the same read; keep them.
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(
                        leftOverBytesStrategy: .forwardBytes,
                        withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
                    )
                    var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri)
                    head.headers.add(name: "Host", value: hostHeader)
                    try channel.pipeline.syncOperations.addHandler(UpgradeRequest(head: head, ready: ready))
                }
            }
        if let source { bootstrap = bootstrap.bind(to: source) }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: host, port: port).get()
        } catch {
            ready.fail(error)
            throw error
        }
        let timer = loop.scheduleTask(in: .nanoseconds(timeout.nanoseconds)) {
            ready.fail(GatewaySocketError.timeout)
            channel.close(promise: nil)
        }
        // A close before the gateway's confirmation fails `ready` in the handlers' channelInactive:
        // a callback on closeFuture would stay with every device's socket for its whole life.
        defer { timer.cancel() }
        try await ready.futureResult.get()
        return GatewaySocket(channel: channel)
    }

    /// Says goodbye with a close frame, then closes.
    package func close() {
        let channel = self.channel
        channel.eventLoop.execute {
            guard channel.isActive else { return }
            var reason = channel.allocator.buffer(capacity: 2)
            reason.write(webSocketErrorCode: .normalClosure)
            let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: reason)
            channel.writeAndFlush(frame).whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

/// Sends the upgrade request once connected; an HTTP answer reaching it means the upgrade was
/// refused. A 503 is read to its end: the push service names its device cap in the body.
private final class UpgradeRequest: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let head: HTTPRequestHead
    private let ready: EventLoopPromise<Void>
    /// The body of a 503 so far (a few hundred bytes; more is not the service's refusal).
    private var refusal: ByteBuffer?

    init(head: HTTPRequestHead, ready: EventLoopPromise<Void>) {
        self.head = head
        self.ready = ready
    }

    func channelActive(context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let answer) where answer.status == .serviceUnavailable:
            refusal = context.channel.allocator.buffer(capacity: 256)
        case .head(let answer):
            ready.fail(GatewaySocketError.refused(answer.status.code))
            context.close(promise: nil)
        case .body(var part):
            if refusal != nil, (refusal?.readableBytes ?? 0) + part.readableBytes <= 4096 { refusal?.writeBuffer(&part) }
        case .end:
            guard let body = refusal else { return }
            ready.fail(Self.cap(in: body).map { GatewaySocketError.atCapacity(cap: $0) } ?? .refused(503))
            context.close(promise: nil)
        }
    }

    /// `cap` of the service's `{"reason":"AtCapacity","cap":N}`; nil for another 503.
    static func cap(in body: ByteBuffer) -> Int? {
        struct Refusal: Decodable {
            var reason: String
            var cap: Int
        }
        guard let refusal = try? JSONDecoder().decode(Refusal.self, from: Data(body.readableBytesView)), refusal.reason == "AtCapacity" else {
            return nil
        }
        return refusal.cap
    }

    func channelInactive(context: ChannelHandlerContext) {
        ready.fail(refusal != nil ? GatewaySocketError.refused(503) : GatewaySocketError.closed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        ready.fail(error)
        context.close(promise: nil)
    }
}

/// The upgraded connection: decodes gateway frames, answers pings and the close handshake.
/// A fragmented text message is put together here (at most 64 fragments, ``maxGatewayFrame``
/// bytes) rather than by NIO's aggregator: one handler fewer on every device's socket, and a
/// buffer only while fragments are in flight.
private final class GatewayFrames: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private var ready: EventLoopPromise<Void>?
    private let onInbound: @Sendable (GatewayInbound, Int64) -> Void
    private var closing = false
    /// A text message's fragments so far, and how many.
    private var partial: (bytes: ByteBuffer, count: Int)?

    init(ready: EventLoopPromise<Void>, onInbound: @escaping @Sendable (GatewayInbound, Int64) -> Void) {
        self.ready = ready
        self.onInbound = onInbound
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text where frame.fin && partial == nil:
            message(frame.unmaskedData)
        case .text where partial == nil:
            partial = (frame.unmaskedData, 1)
        case .continuation where partial != nil:
            guard var bytes = partial?.bytes, let count = partial?.count, count < 64, bytes.readableBytes + frame.length <= maxGatewayFrame else {
                context.close(promise: nil)
                return
            }
            var more = frame.unmaskedData
            bytes.writeBuffer(&more)
            partial = frame.fin ? nil : (bytes, count + 1)
            if frame.fin { message(bytes) }
        case .text, .continuation:
            // A new message inside a fragmented one, or a fragment of none: not WebSocket.
            context.close(promise: nil)
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            guard !closing else {
                context.close(promise: nil)
                return
            }
            closing = true
            var echo = frame.unmaskedData
            let code = echo.readSlice(length: min(2, echo.readableBytes)) ?? ByteBuffer()
            let reply = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: code)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(reply)).whenComplete { _ in channel.close(promise: nil) }
        default:
            break
        }
    }

    /// One whole text message from the gateway.
    private func message(_ bytes: ByteBuffer) {
        let receivedAt = MonotonicClock.nanoseconds()
        var bytes = bytes
        let inbound = GatewayInbound(bytes.readString(length: bytes.readableBytes) ?? "")
        if case .notice(let notice) = inbound, notice.type == .subscribed, let ready {
            self.ready = nil
            ready.succeed()
            return
        }
        onInbound(inbound, receivedAt)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ready?.fail(GatewaySocketError.closed)
        ready = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
