import NIOCore
import NIOHTTP2

/// When an HTTP/2 connection of ``HTTP2RoutesChannel`` closes of its own accord: once it is ending
/// (the server is stopping, or the client ended its input) and no stream is open. A pure machine.
///
/// NIO's server connection manager, before it, sends the GOAWAYs of a graceful stop, but closes
/// only after the client acknowledges its PING, which a client that is gone or idle never does;
/// and with half-closure allowed, nothing else closes a connection whose client ended its input.
package struct HTTP2ConnectionEndState: Sendable {
    private var open = 0
    private var ending = false

    package init() {}

    package mutating func streamOpened() {
        open += 1
    }

    /// Whether to close now.
    package mutating func streamClosed() -> Bool {
        open = max(0, open - 1)
        return ending && open == 0
    }

    /// The connection is ending; whether to close now.
    package mutating func end() -> Bool {
        ending = true
        return open == 0
    }
}

/// Carries out ``HTTP2ConnectionEndState`` after NIO's connection handlers, where every stream's
/// creation and close pass.
final class HTTP2ConnectionEnd: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame

    private var state = HTTP2ConnectionEndState()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        let close: Bool
        switch event {
        case is NIOHTTP2StreamCreatedEvent:
            state.streamOpened()
            close = false
        case is StreamClosedEvent:
            close = state.streamClosed()
        case is ChannelShouldQuiesceEvent:
            close = state.end()
        case let event as ChannelEvent where event == .inputClosed:
            close = state.end()
        default:
            close = false
        }
        context.fireUserInboundEventTriggered(event)
        if close {
            // After the event has gone on: a stream's last frames, or the GOAWAY, go out first.
            context.flush()
            context.close(promise: nil)
        }
    }
}
