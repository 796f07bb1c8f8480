import NIOCore
import NIOPosix
import PushFleetCore
import Synchronization

/// A TCP proxy on the phone link that holds reads back, as a slow radio does: devices connect to
/// it, it connects to the gateway, and each chunk either way is written on after the delay the
/// faults in force give that device, in order (a later chunk never overtakes an earlier one).
///
/// Toxiproxy's latency toxic is the model; pushfleet's own, so that no tool is needed and the
/// delays follow the scenario's windows and seed. Both sides of a pair live on one event loop.
final class PhoneLinkProxy: Sendable {
    private let server: any Channel
    let port: Int
    private let state: InForce

    /// The faults in force (``NetworkFaultRunner`` sets them), and the jitter's draws.
    private final class InForce: Sendable {
        let value: Mutex<(active: [Int], draw: SplitMix64)>

        init(seed: UInt64) {
            value = Mutex((active: [], draw: SplitMix64(seed: seed ^ 0x1A7E_4C71)))
        }
    }

    /// Starts listening on loopback; chunks are held as the faults in force say (none until
    /// ``setActive(_:)``).
    /// Its side to the gateway binds `source`, an address of the run's own in no fault's set.
    static func start(group: any EventLoopGroup, upstream: SocketAddress, source: SocketAddress, plan: NetworkFaultPlan, seed: UInt64) async throws -> PhoneLinkProxy {
        let state = InForce(seed: seed)
        let delay: @Sendable (Int) -> Int64 = { device in
            state.value.withLock { state in
                state.active.isEmpty ? 0 : plan.delay(device: device, active: state.active, draw: &state.draw)
            }
        }
        let server = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { device in
                // Which device this is, worked out once: every chunk of it asks for its delay.
                let index = device.remoteAddress?.ipAddress.flatMap(plan.device(at:))
                let held: @Sendable () -> Int64 = { index.map(delay) ?? 0 }
                return ClientBootstrap(group: device.eventLoop)
                    .channelOption(.socketOption(.tcp_nodelay), value: 1)
                    .bind(to: source)
                    .connect(to: upstream)
                    .flatMap { gateway in
                        do {
                            try device.pipeline.syncOperations.addHandler(Relay(peer: gateway, delay: held))
                            try gateway.pipeline.syncOperations.addHandler(Relay(peer: device, delay: held))
                        } catch {
                            return device.eventLoop.makeFailedFuture(error)
                        }
                        // Held until the gateway's side was there to take what the device sends.
                        return device.setOption(.autoRead, value: true)
                    }
                    .flatMapErrorThrowing { error in
                        device.close(promise: nil)
                        throw error
                    }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return PhoneLinkProxy(server: server, port: server.localAddress?.port ?? 0, state: state)
    }

    private init(server: any Channel, port: Int, state: InForce) {
        self.server = server
        self.port = port
        self.state = state
    }

    /// The faults in force from now on.
    func setActive(_ faults: [Int]) {
        state.value.withLock { $0.active = faults }
    }

    func close() async {
        try? await server.close()
    }

    /// One direction: what `self`'s channel reads goes to `peer`, held back as `delay` says.
    final class Relay: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer

        private let peer: any Channel
        private let delay: () -> Int64
        /// When the last chunk goes out: none may leave before it.
        private var lastRelease = NIODeadline.uptimeNanoseconds(0)

        init(peer: any Channel, delay: @escaping () -> Int64) {
            self.peer = peer
            self.delay = delay
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data)
            let now = NIODeadline.now()
            let held = delay()
            let peer = self.peer
            if held <= 0 && lastRelease <= now {
                peer.writeAndFlush(bytes, promise: nil)
                return
            }
            lastRelease = max(lastRelease, now + .nanoseconds(held))
            context.eventLoop.assumeIsolated().scheduleTask(deadline: lastRelease) { peer.writeAndFlush(bytes, promise: nil) }
        }

        /// The other side goes once what was read before the close has gone out.
        func channelInactive(context: ChannelHandlerContext) {
            let peer = self.peer
            if lastRelease <= NIODeadline.now() {
                peer.close(promise: nil)
            } else {
                context.eventLoop.assumeIsolated().scheduleTask(deadline: lastRelease) { peer.close(promise: nil) }
            }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
