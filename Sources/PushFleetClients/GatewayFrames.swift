import NIOCore
import NIOWebSocket
import PushFleetCore
import PushFleetWire

/// A device's heartbeat on its own socket, as a phone's push client keeps one: times in ns.
package struct GatewayKeepalive: Sendable {
    package var ping: Int64
    package var deadAfter: Int64
    /// Called on the socket's loop as the socket is given up, with how long it was silent.
    package var onDead: @Sendable (Int64) -> Void
    /// Acknowledge each push, so that the gateway holds what a dead socket swallowed (`ack=1`).
    package var acks: Bool

    package init(ping: Int64, deadAfter: Int64, acks: Bool = true, onDead: @escaping @Sendable (Int64) -> Void) {
        self.ping = ping
        self.deadAfter = deadAfter
        self.acks = acks
        self.onDead = onDead
    }
}

/// The upgraded connection: reads gateway frames from the socket's bytes
/// (``WebSocketFrameReader``), answers pings and the close handshake. A fragmented text message
/// is put together here (at most 64 fragments, ``maxGatewayFrame`` bytes) rather than by NIO's
/// aggregator: one handler fewer on every device's socket, and a buffer only while fragments are
/// in flight. A frame no server may send closes the socket.
final class GatewayFrames: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var ready: EventLoopPromise<Void>?
    private let onInbound: @Sendable (GatewayInbound, Int64) -> Void
    private var closing = false
    private var reader = WebSocketFrameReader(maxPayload: maxGatewayFrame)
    /// A text message's fragments so far, and how many.
    private var partial: (bytes: ByteBuffer, count: Int)?
    private let keepalive: GatewayKeepalive?
    /// When the gateway was last heard from (monotonic ns), and whether a ping awaits its answer.
    private var lastHeard: Int64 = MonotonicClock.nanoseconds()
    private var pinged = false
    private var check: Scheduled<Void>?

    init(ready: EventLoopPromise<Void>, keepalive: GatewayKeepalive? = nil, onInbound: @escaping @Sendable (GatewayInbound, Int64) -> Void) {
        self.ready = ready
        self.keepalive = keepalive
        self.onInbound = onInbound
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard let keepalive else { return }
        lastHeard = MonotonicClock.nanoseconds()
        schedule(at: lastHeard + keepalive.ping, keepalive, context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
    }

    /// One timer per socket, set for the next thing due: the ping once the gateway has been
    /// quiet for `ping`, the verdict once it has been quiet for `deadAfter`. Frames only move
    /// `lastHeard`; the timer reads it when it fires.
    private func schedule(at instant: Int64, _ keepalive: GatewayKeepalive, context: ChannelHandlerContext) {
        let delay = max(0, instant - MonotonicClock.nanoseconds())
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleTask(in: .nanoseconds(delay)) { bound.value.handler.due(keepalive, context: bound.value.context) }
    }

    private func due(_ keepalive: GatewayKeepalive, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        let now = MonotonicClock.nanoseconds()
        let silent = now - lastHeard
        if silent >= keepalive.deadAfter {
            // Half-open: nothing came back, not even a FIN. Give the socket up; closing it is
            // what makes the device reconnect.
            check = nil
            keepalive.onDead(silent)
            context.close(promise: nil)
            return
        }
        if silent >= keepalive.ping && !pinged {
            pinged = true
            let ping = WebSocketFrameReader.controlFrame(.ping, payload: ByteBuffer(), allocator: context.channel.allocator)
            context.writeAndFlush(wrapOutboundOut(ping), promise: nil)
        }
        schedule(at: lastHeard + (pinged ? keepalive.deadAfter : keepalive.ping), keepalive, context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if keepalive != nil {
            lastHeard = MonotonicClock.nanoseconds()
            pinged = false
        }
        reader.append(unwrapInboundIn(data))
        while context.channel.isActive {
            switch reader.next() {
            case .frame(let frame): handle(frame, context: context)
            case .needMore: return
            case .violation: return context.close(promise: nil)
            }
        }
    }

    private func handle(_ frame: WebSocketFrameReader.Frame, context: ChannelHandlerContext) {
        switch frame.opcode {
        case .text where frame.fin && partial == nil:
            message(frame.payload, context: context)
        case .text where partial == nil:
            partial = (frame.payload, 1)
        case .continuation where partial != nil:
            guard var bytes = partial?.bytes, let count = partial?.count, count < 64, bytes.readableBytes + frame.payload.readableBytes <= maxGatewayFrame else {
                context.close(promise: nil)
                return
            }
            var more = frame.payload
            bytes.writeBuffer(&more)
            partial = frame.fin ? nil : (bytes, count + 1)
            if frame.fin { message(bytes, context: context) }
        case .text, .continuation:
            // A new message inside a fragmented one, or a fragment of none: not WebSocket.
            context.close(promise: nil)
        case .ping:
            let pong = WebSocketFrameReader.controlFrame(.pong, payload: frame.payload, allocator: context.channel.allocator)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            guard !closing else {
                context.close(promise: nil)
                return
            }
            closing = true
            var echo = frame.payload
            let code = echo.readSlice(length: min(2, echo.readableBytes)) ?? ByteBuffer()
            let reply = WebSocketFrameReader.controlFrame(.connectionClose, payload: code, allocator: context.channel.allocator)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(reply)).whenComplete { _ in channel.close(promise: nil) }
        default:
            break
        }
    }

    /// One whole text message from the gateway.
    private func message(_ bytes: ByteBuffer, context: ChannelHandlerContext) {
        let receivedAt = MonotonicClock.nanoseconds()
        var bytes = bytes
        let inbound = GatewayInbound(bytes.readString(length: bytes.readableBytes) ?? "")
        if case .notice(let notice) = inbound, notice.type == .subscribed, let ready {
            self.ready = nil
            // What it says of the last connection is the device's to measure.
            if notice.offlineSince != nil || notice.tookOver == true { onInbound(inbound, receivedAt) }
            ready.succeed()
            return
        }
        if keepalive?.acks == true, case .push(let push) = inbound, push.type != PushFrame.refusedType, let number = push.push {
            // Short enough for a single unfragmented frame (≤ 125 bytes).
            let ack = ByteBuffer(string: #"{"op":"ack","pushes":[\#(number)]}"#)
            context.writeAndFlush(wrapOutboundOut(WebSocketFrameReader.controlFrame(.text, payload: ack, allocator: context.channel.allocator)), promise: nil)
        }
        onInbound(inbound, receivedAt)
    }

    func channelInactive(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
        ready?.fail(GatewaySocketError.closed)
        ready = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
