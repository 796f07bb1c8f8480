import Foundation
import HummingbirdWSClient
package import NIOCore
package import Logging
package import PushFleetWire

/// The multiplexed gateway WebSocket: one connection carrying many devices' commands and pushes.
///
/// Unlike a device's own ``GatewaySocket`` it is held by one task for its whole life, so it is
/// an async sequence of frames and a writer rather than NIO callbacks.
package struct GatewayMuxSocket: Sendable {
    /// Many devices' pushes share the connection: a frame may batch several.
    static let maxFrame = 16 << 20

    private let inbound: WebSocketInboundStream
    private let outbound: WebSocketOutboundWriter

    /// Connects to `url` on `loop` and runs `session` while the connection is open; the
    /// connection closes when `session` returns or throws, and its error is rethrown.
    package static func connect(
        url: String, on loop: any EventLoop, logger: Logger, _ session: @escaping @Sendable (GatewayMuxSocket) async throws -> Void
    ) async throws {
        try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: maxFrame), eventLoopGroup: loop, logger: logger) {
            inbound, outbound, _ in
            try await session(GatewayMuxSocket(inbound: inbound, outbound: outbound))
        }
    }

    package func send(_ command: GatewayCommand) async throws {
        try await outbound.write(.text(command.encodedJSON))
    }

    /// The gateway's text frames, decoded, until the connection closes.
    package var frames: Frames { Frames(messages: inbound.messages(maxSize: Self.maxFrame)) }

    package struct Frames: AsyncSequence {
        let messages: WebSocketInboundMessageStream

        package func makeAsyncIterator() -> Iterator { Iterator(base: messages.makeAsyncIterator()) }

        package struct Iterator: AsyncIteratorProtocol {
            var base: WebSocketInboundMessageStream.AsyncIterator

            package mutating func next() async throws -> GatewayInbound? {
                while let message = try await base.next() {
                    if case .text(let text) = message { return GatewayInbound(text) }
                }
                return nil
            }
        }
    }
}
