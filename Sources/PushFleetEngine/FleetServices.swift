import Logging
import NIOCore
import NIOPosix
import PushFleetClients
import PushFleetCore

/// The fleet's ways to the system under test: its URLs and controls, the backend's HTTP pool,
/// the push service's address for devices' own sockets, and the event loops they run on.
final class FleetServices: Sendable {
    /// Where the system under test listens, and what the run may do to it.
    let system: SystemUnderTest
    let backend: BackendClient
    /// The push service's host and port, for devices' own sockets.
    let gateway: Origin
    let eventLoops: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    let deviceWork = DeviceWork(loops: MultiThreadedEventLoopGroup.singleton)
    let sourceAddresses: [SocketAddress]
    let trace: (@Sendable (RequestTrace) -> Void)?
    /// What the run's browsers share; nil when the fleet has none.
    let webPush: WebPushShared?
    let logger: Logger
    /// The run's network faults: each device's address, and when its link was cut.
    let network: NetworkFaultPlan?
    /// The run's proxy on the phone link, when a fault delays it: devices connect to it.
    let phoneProxy: PhoneLinkProxy?

    init(
        system: SystemUnderTest, connections: Int, sourceAddresses: [SocketAddress], trace: (@Sendable (RequestTrace) -> Void)?,
        browsers: Bool, clock: any RunClock, logger: Logger, network: NetworkFaultPlan? = nil, phoneProxy: PhoneLinkProxy? = nil
    ) {
        self.system = system
        self.network = network
        self.phoneProxy = phoneProxy
        self.sourceAddresses = sourceAddresses
        self.trace = trace
        self.logger = logger
        self.backend = BackendClient(baseURL: system.backend, connections: connections, sourceAddresses: sourceAddresses, clock: clock)
        let gateway = Origin(system.pushService) ?? Origin("http://127.0.0.1")!
        self.gateway = phoneProxy.flatMap { Origin("http://127.0.0.1:\($0.port)") } ?? gateway
        self.webPush = browsers ? WebPushShared(pushServiceURL: system.pushService, clock: clock) : nil
    }

    /// The push service's base URL (`http://…`).
    var pushServiceURL: String { system.pushService }

    /// The local address a device's own socket binds to, when the scenario spreads sockets over
    /// several source addresses (past one address's ephemeral ports).
    func sourceAddress(_ device: Int) -> SocketAddress? {
        sourceAddresses.isEmpty ? nil : sourceAddresses[device % sourceAddresses.count]
    }

    /// The local address a device's own gateway socket binds to: its own with network faults,
    /// so that the kernel's rules can tell it from every other device.
    func gatewaySource(_ device: Int) -> SocketAddress? {
        guard let network else { return sourceAddress(device) }
        return try? SocketAddress(ipAddress: network.address(of: device), port: 0)
    }
}
