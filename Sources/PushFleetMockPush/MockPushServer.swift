import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import HummingbirdWebSocket
public import Logging
import NIOCore
public import PushFleetHub
public import PushFleetServerSupport
public import ServiceLifecycle

/// The mock push service as servers: HTTP/1.1 (provider endpoints, admin, and the WebSocket
/// device gateway) and, optionally, HTTP/2 cleartext with prior knowledge for the provider
/// endpoints (as APNs speaks HTTP/2).
public struct MockPushServer: Sendable {
    public struct Configuration: Sendable {
        public var listen: ListenAddress
        /// Where to also serve HTTP/2 cleartext; nil for none.
        public var http2Listen: ListenAddress?
        /// Pending connections the kernel queues; connection storms of thousands of devices
        /// overflow Hummingbird's default of 256.
        public var backlog: Int
        /// Timeouts and the connection cap of the HTTP/1.1 port, and of the h2c port.
        public var limits: ServerLimits
        public var http2Limits: ServerLimits
        /// Bearer token the admin API requires; nil for none (loopback-only setups that say so).
        public var adminToken: String?
        /// The notification hub served at `/{hub}/…`; nil for none.
        public var hub: NotificationHub.Settings?

        public init(
            listen: ListenAddress = .init(host: "127.0.0.1", port: 0),
            http2Listen: ListenAddress? = nil,
            backlog: Int = 4096,
            limits: ServerLimits = .init(),
            http2Limits: ServerLimits? = nil,
            adminToken: String? = MockPushServer.randomToken(),
            hub: NotificationHub.Settings? = nil
        ) {
            self.adminToken = adminToken
            self.hub = hub
            self.listen = listen
            self.http2Listen = http2Listen
            self.backlog = backlog
            self.limits = limits
            self.http2Limits = http2Limits ?? limits
        }
    }

    public let service: PushService
    public let configuration: Configuration
    /// The notification hub in front of this push service, when configured.
    public let hub: NotificationHub?
    /// The bound HTTP/1.1 address, known once the server listens.
    public let bound = Readiness<ListenAddress>()
    /// The bound HTTP/2 address, when one was asked for.
    public let boundHTTP2 = Readiness<ListenAddress>()

    public init(service: PushService, configuration: Configuration = .init()) {
        self.service = service
        self.configuration = configuration
        self.hub = configuration.hub.map { NotificationHub(settings: $0, delivery: HubDelivery(service: service, fcmProject: "pushfleet")) }
    }

    func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        APNsEndpoint(service: service).register(on: router)
        FCMEndpoint(service: service).register(on: router)
        WNSEndpoint(service: service).register(on: router)
        AdminEndpoint(service: service, token: configuration.adminToken).register(on: router)
        DeviceGateway(service: service).register(on: router)
        // `/{hub}/…` matches only what the constant first segments above leave.
        if let hub { HubEndpoint(hub: hub).register(on: router) }
        return router
    }

    /// The services to run (in a `ServiceGroup`, or one by one with `runService()`).
    public func makeServices(logger: Logger) -> [any Service] {
        let router = makeRouter()
        let gateway = DeviceGateway(service: service)
        let bound = self.bound
        let limits = configuration.limits
        let http1 = Application(
            router: router,
            server: HTTPServerBuilder { responder in
                GuardedChildChannel(
                    HTTP1WebSocketUpgradeChannel(
                        responder: responder,
                        configuration: .init(http1: limits.http1Configuration(), ws: .init(maxFrameSize: DeviceGateway.maxInboundMessage)),
                        // Synchronous: decided on the event loop, with no task per upgrade.
                        shouldUpgrade: { @Sendable (head: HTTPRequest, _: any Channel, _: Logger) throws in gateway.shouldUpgrade(head) }
                    ),
                    headerTimeout: limits.headerTimeout
                )
            },
            configuration: .init(
                address: .hostname(configuration.listen.host, port: configuration.listen.port),
                serverName: "pushfleet-mock-push",
                backlog: configuration.backlog,
                availableConnectionsDelegate: limits.connectionsDelegate
            ),
            onServerRunning: { channel in
                bound.succeed(Self.boundAddress(channel, fallback: configuration.listen))
            },
            logger: logger
        )
        guard let h2 = configuration.http2Listen else { return [http1] }
        let boundHTTP2 = self.boundHTTP2
        let h2Limits = configuration.http2Limits
        let http2 = Application(
            router: router,
            server: HTTPServerBuilder { responder in
                GuardedChildChannel(
                    HTTP2Channel(
                        responder: responder,
                        configuration: .init(idleTimeout: h2Limits.idleTimeout, streamConfiguration: h2Limits.http1Configuration())
                    ),
                    headerTimeout: h2Limits.headerTimeout
                )
            },
            configuration: .init(
                address: .hostname(h2.host, port: h2.port),
                serverName: "pushfleet-mock-push-h2",
                backlog: configuration.backlog,
                availableConnectionsDelegate: configuration.http2Limits.connectionsDelegate
            ),
            onServerRunning: { channel in
                boundHTTP2.succeed(Self.boundAddress(channel, fallback: h2))
            },
            logger: logger
        )
        return [http1, http2]
    }

    /// 128 random bits as hex.
    public static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in
            let hex = String(generator.next() as UInt32, radix: 16)
            return String(repeating: "0", count: 8 - hex.count) + hex
        }.joined()
    }

    static func boundAddress(_ channel: any Channel, fallback: ListenAddress) -> ListenAddress {
        ListenAddress(host: fallback.host, port: channel.localAddress?.port ?? fallback.port)
    }
}
