import NIOCore
import NIOPosix
import PushFleetCore
import Synchronization

/// A TCP proxy on the phone link that does to each device's connection what the faults in
/// force say, as a bad radio does: holds reads back (latency, jitter), paces them (bandwidth),
/// passes them on in pieces (slicer), swallows them (timeout), delays a close (slow_close), and
/// cuts connections (timeout's close, reset_peer's RST). Devices connect to it, it connects to
/// the gateway; chunks either way keep their order (a later one never overtakes an earlier one).
///
/// Toxiproxy's toxics are the model; pushfleet's own, so that no tool is needed and the toxics
/// follow the scenario's windows and seed. Both sides of a pair live on one event loop. The
/// decisions are the plan's (``NetworkFaultPlan/toxics(device:active:draw:)``); this only
/// carries them out.
final class PhoneLinkProxy: Sendable {
    private let server: any Channel
    let port: Int
    private let state: InForce

    /// One device's connection through the proxy: its two channels.
    struct Pair: Sendable {
        let device: any Channel
        let gateway: any Channel
    }

    /// The faults in force (``NetworkFaultRunner`` sets them), the jitter's draws, and the
    /// open connections by device, for the faults that cut them.
    private final class InForce: Sendable {
        struct Values {
            var active: [Int] = []
            var draw: SplitMix64
            var open: [Int: [ObjectIdentifier: Pair]] = [:]
        }

        let plan: NetworkFaultPlan
        let value: Mutex<Values>

        init(plan: NetworkFaultPlan, seed: UInt64) {
            self.plan = plan
            value = Mutex(Values(draw: SplitMix64(seed: seed ^ 0x1A7E_4C71)))
        }

        func toxics(_ device: Int) -> NetworkFaultPlan.LinkToxics {
            value.withLock { state in
                state.active.isEmpty ? NetworkFaultPlan.LinkToxics() : plan.toxics(device: device, active: state.active, draw: &state.draw)
            }
        }
    }

    /// Starts listening on loopback; nothing is done to chunks until ``setActive(_:began:)``.
    /// Its side to the gateway binds `source`, an address of the run's own in no fault's set.
    static func start(group: any EventLoopGroup, upstream: SocketAddress, source: SocketAddress, plan: NetworkFaultPlan, seed: UInt64) async throws -> PhoneLinkProxy {
        let state = InForce(plan: plan, seed: seed)
        let server = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { device in
                // Which device this is, worked out once: every chunk of it asks for its toxics.
                let index = device.remoteAddress?.ipAddress.flatMap(plan.device(at:))
                let toxics: @Sendable () -> NetworkFaultPlan.LinkToxics = { index.map(state.toxics) ?? NetworkFaultPlan.LinkToxics() }
                return ClientBootstrap(group: device.eventLoop)
                    .channelOption(.socketOption(.tcp_nodelay), value: 1)
                    .bind(to: source)
                    .connect(to: upstream)
                    .flatMap { gateway in
                        do {
                            try device.pipeline.syncOperations.addHandler(Relay(peer: gateway, toxics: toxics))
                            try gateway.pipeline.syncOperations.addHandler(Relay(peer: device, toxics: toxics))
                        } catch {
                            return device.eventLoop.makeFailedFuture(error)
                        }
                        if let index { Self.opened(Pair(device: device, gateway: gateway), of: index, state) }
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

    /// Registers a device's connection, and cuts it in time if a fault in force says so.
    private static func opened(_ pair: Pair, of device: Int, _ state: InForce) {
        let key = ObjectIdentifier(pair.device)
        let active = state.value.withLock { values in
            values.open[device, default: [:]][key] = pair
            return values.active
        }
        pair.device.closeFuture.whenComplete { _ in
            state.value.withLock { values in
                values.open[device]?[key] = nil
                if values.open[device]?.isEmpty == true { values.open[device] = nil }
            }
        }
        for index in active where state.plan.touches(index, device: device) {
            if let cut = state.plan.cut(index) { schedule(cut, pair) }
        }
    }

    /// Closes both sides after `cut.after`, with RST both ways when `cut.reset`.
    private static func schedule(_ cut: (after: Duration, reset: Bool), _ pair: Pair) {
        pair.device.eventLoop.scheduleTask(in: .nanoseconds(cut.after.nanoseconds)) {
            for channel in [pair.device, pair.gateway] {
                if cut.reset, let socket = channel as? any SocketOptionProvider {
                    // SO_LINGER {on, 0}: close() sends RST and drops what was queued.
                    socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
                } else {
                    channel.close(promise: nil)
                }
            }
        }
    }

    /// The faults in force from now on; those in `began` cut the connections they touch.
    func setActive(_ faults: [Int], began: [Int] = []) {
        let pairs: [(Int, [Pair])] = state.value.withLock { values in
            values.active = faults
            return began.map { index in
                guard state.plan.cut(index) != nil else { return (index, []) }
                return (index, state.plan.members[index].flatMap { values.open[$0].map { Array($0.values) } ?? [] })
            }
        }
        for (index, touched) in pairs {
            guard let cut = state.plan.cut(index) else { continue }
            for pair in touched { Self.schedule(cut, pair) }
        }
    }

    func close() async {
        try? await server.close()
    }

    /// One direction: what `self`'s channel reads goes to `peer`, as the toxics in force say.
    final class Relay: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer

        private let peer: any Channel
        private let toxics: () -> NetworkFaultPlan.LinkToxics
        /// When the last piece goes out: none may leave before it.
        private var lastRelease = NIODeadline.uptimeNanoseconds(0)

        init(peer: any Channel, toxics: @escaping () -> NetworkFaultPlan.LinkToxics) {
            self.peer = peer
            self.toxics = toxics
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data)
            let now = NIODeadline.now()
            let toxics = toxics()
            // A timeout swallows what passes, as a link that answers nothing.
            if toxics.blackhole { return }
            let peer = self.peer
            if toxics.delay <= 0 && toxics.bytesPerSecond == nil && toxics.slice == nil && lastRelease <= now {
                peer.writeAndFlush(bytes, promise: nil)
                return
            }
            var pieces: [ByteBuffer] = []
            if let slice = toxics.slice {
                var rest = bytes
                while rest.readableBytes > 0, let piece = rest.readSlice(length: min(slice.size, rest.readableBytes)) { pieces.append(piece) }
            } else {
                pieces = [bytes]
            }
            var release = max(lastRelease, now + .nanoseconds(toxics.delay))
            let loop = context.eventLoop.assumeIsolated()
            for (number, piece) in pieces.enumerated() {
                if number > 0, let slice = toxics.slice { release = release + .nanoseconds(slice.gap) }
                // Paced: a piece leaves once the bytes before it have had their time.
                if let rate = toxics.bytesPerSecond { release = release + .nanoseconds(Int64(piece.readableBytes) * 1_000_000_000 / Int64(rate)) }
                if release <= now {
                    peer.writeAndFlush(piece, promise: nil)
                } else {
                    loop.scheduleTask(deadline: release) { peer.writeAndFlush(piece, promise: nil) }
                }
            }
            lastRelease = release
        }

        /// The other side goes once what was read before the close has gone out, and later
        /// still under a slow close.
        func channelInactive(context: ChannelHandlerContext) {
            let peer = self.peer
            let closeAt = max(lastRelease, NIODeadline.now()) + .nanoseconds(toxics().slowClose)
            if closeAt <= NIODeadline.now() {
                peer.close(promise: nil)
            } else {
                context.eventLoop.assumeIsolated().scheduleTask(deadline: closeAt) { peer.close(promise: nil) }
            }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
