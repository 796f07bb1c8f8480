import Hummingbird
import HummingbirdHTTP2
import HummingbirdWebSocket
public import Logging
import NIOCore
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

        public init(listen: ListenAddress = .init(host: "127.0.0.1", port: 0), http2Listen: ListenAddress? = nil, backlog: Int = 4096) {
            self.listen = listen
            self.http2Listen = http2Listen
            self.backlog = backlog
        }
    }

    public let service: PushService
    public let configuration: Configuration
    /// The bound HTTP/1.1 address, known once the server listens.
    public let bound = Readiness<ListenAddress>()
    /// The bound HTTP/2 address, when one was asked for.
    public let boundHTTP2 = Readiness<ListenAddress>()

    public init(service: PushService, configuration: Configuration = .init()) {
        self.service = service
        self.configuration = configuration
    }

    func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        APNsEndpoint(service: service).register(on: router)
        FCMEndpoint(service: service).register(on: router)
        WNSEndpoint(service: service).register(on: router)
        AdminEndpoint(service: service).register(on: router)
        DeviceGateway(service: service).register(on: router)
        return router
    }

    /// The services to run (in a `ServiceGroup`, or one by one with `runService()`).
    public func makeServices(logger: Logger) -> [any Service] {
        let router = makeRouter()
        let gateway = DeviceGateway(service: service)
        let bound = self.bound
        let http1 = Application(
            router: router,
            server: .http1WebSocketUpgrade(
                configuration: .init(http1: .init(), ws: .init(maxFrameSize: DeviceGateway.maxInboundMessage))
            ) { head, _, _ in
                gateway.shouldUpgrade(head)
            },
            configuration: .init(
                address: .hostname(configuration.listen.host, port: configuration.listen.port),
                serverName: "pushfleet-mock-push",
                backlog: configuration.backlog
            ),
            onServerRunning: { channel in
                bound.succeed(Self.boundAddress(channel, fallback: configuration.listen))
            },
            logger: logger
        )
        guard let h2 = configuration.http2Listen else { return [http1] }
        let boundHTTP2 = self.boundHTTP2
        let http2 = Application(
            router: router,
            server: .plaintextHTTP2(),
            configuration: .init(
                address: .hostname(h2.host, port: h2.port),
                serverName: "pushfleet-mock-push-h2",
                backlog: configuration.backlog
            ),
            onServerRunning: { channel in
                boundHTTP2.succeed(Self.boundAddress(channel, fallback: h2))
            },
            logger: logger
        )
        return [http1, http2]
    }

    static func boundAddress(_ channel: any Channel, fallback: ListenAddress) -> ListenAddress {
        ListenAddress(host: fallback.host, port: channel.localAddress?.port ?? fallback.port)
    }
}
