import NIOCore
import NIOHTTP2

/// When an HTTP/2 connection of ``HTTP2RoutesChannel`` closes of its own accord: once it is ending
/// (the server is stopping, or the client ended its input) and no stream is open. A pure machine.
///
/// NIO's server connection manager, before it, sends the GOAWAYs of a graceful stop, but closes
/// only after the client acknowledges its PING, which a client that is gone or idle never does;
/// and with half-closure allowed, nothing else closes a connection whose client ended its input.
package struct HTTP2ConnectionEndState: Sendable {
    /// The open streams, each with whether the client has ended its side (its request is whole).
    private var open: [Int: Bool] = [:]
    private var ending = false
    private var inputEnded = false

    package init() {}

    package mutating func streamOpened(_ id: Int) {
        open[id] = false
    }

    /// The client ended its side of a stream (END_STREAM).
    package mutating func clientEnded(_ id: Int) {
        if open[id] != nil { open[id] = true }
    }

    /// Whether to close now.
    package mutating func streamClosed(_ id: Int) -> Bool {
        open[id] = nil
        return shouldClose
    }

    /// The connection is ending: the server is stopping (`inputClosed` false), or the client
    /// ended its input. Whether to close now.
    package mutating func end(inputClosed: Bool) -> Bool {
        ending = true
        if inputClosed { inputEnded = true }
        return shouldClose
    }

    /// Whether an error NIO's handler reported ends the connection: every one but a stream's
    /// own. After a connection error NIO has written its GOAWAY, and RFC 9113 §5.4.1 has the
    /// connection closed then; NIO leaves that to the handlers after it.
    package static func endsConnection(_ error: any Error) -> Bool {
        !(error is NIOHTTP2Errors.StreamError)
    }

    /// A stopping server waits for every open stream. Once the client's input has ended, a
    /// stream whose request it had not finished can never finish: only streams being answered
    /// are waited for.
    private var shouldClose: Bool {
        guard ending else { return false }
        return inputEnded ? !open.values.contains(true) : open.isEmpty
    }
}

/// Carries out ``HTTP2ConnectionEndState`` after NIO's connection handlers, where every stream's
/// creation and close pass.
final class HTTP2ConnectionEnd: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame

    private var state = HTTP2ConnectionEndState()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers) where headers.endStream: state.clientEnded(Int(frame.streamID))
        case .data(let data) where data.endStream: state.clientEnded(Int(frame.streamID))
        default: break
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.fireErrorCaught(error)
        if HTTP2ConnectionEndState.endsConnection(error) { context.close(promise: nil) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        let close: Bool
        switch event {
        case let created as NIOHTTP2StreamCreatedEvent:
            state.streamOpened(Int(created.streamID))
            close = false
        case let closed as StreamClosedEvent:
            close = state.streamClosed(Int(closed.streamID))
        case is ChannelShouldQuiesceEvent:
            close = state.end(inputClosed: false)
        case let event as ChannelEvent where event == .inputClosed:
            close = state.end(inputClosed: true)
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
