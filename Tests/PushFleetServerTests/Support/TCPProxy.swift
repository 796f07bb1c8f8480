import NIOCore
import NIOPosix
import Synchronization

/// A TCP proxy in front of a server that a test can take down: while down it closes every open
/// connection and every new one at once, counting the attempts, as a push gateway behind a load
/// balancer looks when it is gone.
final class TCPProxy: Sendable {
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

    var attemptsWhileDown: Int { state.withLock { $0.attemptsWhileDown } }
    var connectionsWhileUp: Int { state.withLock { $0.connectionsWhileUp } }

    static func start(upstreamPort: Int) async throws -> (TCPProxy, port: Int) {
        let proxy = TCPProxy(upstreamPort: upstreamPort)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { channel in
                proxy.accepted(channel)
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).get()
        proxy.listener.withLock { $0 = channel }
        return (proxy, channel.localAddress?.port ?? 0)
    }

    func goDown() {
        let open = state.withLock { state in
            state.down = true
            defer { state.open.removeAll() }
            return Array(state.open.values)
        }
        for channel in open { channel.close(promise: nil) }
    }

    func goUp() {
        state.withLock { $0.down = false }
    }

    func stop() async {
        goDown()
        try? await listener.withLock({ $0 })?.close()
    }

    private func accepted(_ inbound: any Channel) {
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
        ClientBootstrap(group: inbound.eventLoop).connect(host: "127.0.0.1", port: upstreamPort).whenComplete { result in
            switch result {
            case .success(let outbound):
                self.state.withLock { $0.open[ObjectIdentifier(outbound)] = outbound }
                _ = inbound.pipeline.addHandler(Glue(peer: outbound))
                _ = outbound.pipeline.addHandler(Glue(peer: inbound))
                inbound.setOption(.autoRead, value: true).whenComplete { _ in inbound.read() }
            case .failure:
                inbound.close(promise: nil)
            }
        }
    }

    /// Copies bytes to the other side and closes it when this side closes.
    private final class Glue: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let peer: any Channel

        init(peer: any Channel) { self.peer = peer }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            peer.writeAndFlush(unwrapInboundIn(data), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            peer.close(promise: nil)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
