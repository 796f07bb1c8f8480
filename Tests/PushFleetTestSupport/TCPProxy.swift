import NIOCore
import NIOPosix
import Synchronization

/// A TCP proxy in front of a server that a test can take down: while down it closes every open
/// connection and every new one at once, counting the attempts, as a push gateway behind a load
/// balancer looks when it is gone.
package final class TCPProxy: Sendable {
    private struct State {
        var down = false
        var attemptsWhileDown = 0
        var connectionsWhileUp = 0
        var open: [ObjectIdentifier: any Channel] = [:]
    }

    private let state = Mutex(State())
    private let upstreamPort: Int
    private let listener = Mutex<(any Channel)?>(nil)

    private init(upstreamPort: Int) {
        self.upstreamPort = upstreamPort
    }

    package var attemptsWhileDown: Int { state.withLock { $0.attemptsWhileDown } }
    package var connectionsWhileUp: Int { state.withLock { $0.connectionsWhileUp } }

    package static func start(upstreamPort: Int) async throws -> (TCPProxy, port: Int) {
        let proxy = TCPProxy(upstreamPort: upstreamPort)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try proxy.accepted(channel) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        proxy.listener.withLock { $0 = channel }
        return (proxy, channel.localAddress?.port ?? 0)
    }

    package func goDown() {
        let open = state.withLock { state in
            state.down = true
            defer { state.open.removeAll() }
            return Array(state.open.values)
        }
        for channel in open { channel.close(promise: nil) }
    }

    package func goUp() {
        state.withLock { $0.down = false }
    }

    package func stop() async {
        goDown()
        try? await listener.withLock({ $0 })?.close()
    }

    /// Runs on the accepted channel's event loop: bytes that arrive before the upstream
    /// connection is up wait in the inbound handler.
    private func accepted(_ inbound: any Channel) throws {
        let down = state.withLock { state in
            if state.down {
                state.attemptsWhileDown += 1
            } else {
                state.connectionsWhileUp += 1
                state.open[ObjectIdentifier(inbound)] = inbound
            }
            return state.down
        }
        guard !down else {
            inbound.close(promise: nil)
            return
        }
        let glue = Glue()
        try inbound.pipeline.syncOperations.addHandler(glue)
        let bound = NIOLoopBound(glue, eventLoop: inbound.eventLoop)
        ClientBootstrap(group: inbound.eventLoop)
            .channelInitializer { outbound in
                let back = Glue()
                back.attach(inbound)
                return outbound.eventLoop.makeCompletedFuture { try outbound.pipeline.syncOperations.addHandler(back) }
            }
            .connect(host: "127.0.0.1", port: upstreamPort)
            .whenComplete { result in
                switch result {
                case .success(let outbound):
                    self.state.withLock { $0.open[ObjectIdentifier(outbound)] = outbound }
                    bound.value.attach(outbound)
                case .failure:
                    inbound.close(promise: nil)
                }
            }
    }

    /// Copies bytes to the other side (holding them until it is known) and closes it when this
    /// side closes. Lives on one event loop: both sides of a connection share it.
    private final class Glue: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        private var peer: (any Channel)?
        private var pending: [ByteBuffer] = []
        private var closed = false

        func attach(_ peer: any Channel) {
            self.peer = peer
            if closed { peer.close(promise: nil) }
            for buffer in pending { peer.write(buffer, promise: nil) }
            if !pending.isEmpty { peer.flush() }
            pending.removeAll()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            if let peer { peer.writeAndFlush(buffer, promise: nil) } else { pending.append(buffer) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            closed = true
            peer?.close(promise: nil)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
