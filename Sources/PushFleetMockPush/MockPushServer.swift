import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import HummingbirdWebSocket
public import Logging
import NIOCore
public import PushFleetCore
public import PushFleetHub
public import PushFleetServerSupport
public import ServiceLifecycle
import Synchronization

/// The mock push service as servers: HTTP/1.1 (provider endpoints, OAuth, admin, and the
/// WebSocket device gateway); optionally HTTP/2 cleartext with prior knowledge; and optionally
/// TLS with HTTP/2 and HTTP/1.1 on one port, as the real services' hosts speak. Every listener
/// serves the same router (``makeRouter()``).
public struct MockPushServer: Sendable {
    /// A TLS listener: the certificate it presents, and whether it asks for client certificates
    /// (APNs certificate-based authentication).
    public struct TLS: Sendable {
        public var listen: ListenAddress
        public var identity: TLSIdentity
        /// `.optional(trustRootsPEM:)` asks clients for a certificate without requiring one.
        public var clientCertificates: TLSIdentity.ClientCertificates
        public var limits: ServerLimits

        public init(
            listen: ListenAddress,
            identity: TLSIdentity,
            clientCertificates: TLSIdentity.ClientCertificates = .optional(trustRootsPEM: nil),
            limits: ServerLimits = .init()
        ) {
            self.listen = listen
            self.identity = identity
            self.clientCertificates = clientCertificates
            self.limits = limits
        }
    }

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
        /// Where the hub records its spans; nil: it records none.
        public var hubSpans: SpanRecorder?
        /// Where to also serve TLS; nil for none.
        public var tls: TLS?
        /// Device WebSockets each gateway port (HTTP/1.1, TLS) holds at most; the rest of the
        /// port's connections are kept for providers, hubs and admin. Nil: the port's connection
        /// cap less a reserve (``deviceCap(total:)``). Never more than the port's cap less one.
        public var maxDeviceConnections: Int?
        /// How often the gateway pings each device WebSocket; one left unanswered for a whole
        /// period closes the socket (a half-open link found dead within twice this).
        public var gatewayPing: Duration = .seconds(30)

        public init(
            listen: ListenAddress = .init(host: "127.0.0.1", port: 0),
            http2Listen: ListenAddress? = nil,
            backlog: Int = 4096,
            limits: ServerLimits = .init(),
            http2Limits: ServerLimits? = nil,
            adminToken: String? = MockPushServer.randomToken(),
            hub: NotificationHub.Settings? = nil,
            tls: TLS? = nil,
            maxDeviceConnections: Int? = nil
        ) {
            self.maxDeviceConnections = maxDeviceConnections
            self.adminToken = adminToken
            self.hub = hub
            self.tls = tls
            self.listen = listen
            self.http2Listen = http2Listen
            self.backlog = backlog
            self.limits = limits
            self.http2Limits = http2Limits ?? limits
        }

        /// The device cap of the HTTP/1.1 port, as the server will apply it.
        public var deviceCap: Int {
            let total = limits.maxConnections ?? ServerLimits.defaultMaxConnections()
            return maxDeviceConnections.map { min($0, max(1, total - 1)) } ?? Self.deviceCap(total: total)
        }

        /// The device cap of the TLS port, when there is one.
        public var tlsDeviceCap: Int? {
            guard let tls else { return nil }
            let total = tls.limits.maxConnections ?? ServerLimits.defaultMaxConnections()
            return maxDeviceConnections.map { min($0, max(1, total - 1)) } ?? Self.deviceCap(total: total)
        }

        /// The device cap a port serving `total` connections gets by default: a reserve is kept
        /// for providers, hubs and admin (a tenth, at least 128, at most half, at most 1,024).
        public static func deviceCap(total: Int) -> Int { DeviceCap.defaultCap(total: total) }
    }

    public let service: PushService
    public let configuration: Configuration
    /// The notification hub in front of this push service, when configured.
    public let hub: NotificationHub?
    /// The bound HTTP/1.1 address, known once the server listens.
    public let bound = Readiness<ListenAddress>()
    /// The bound HTTP/2 address, when one was asked for.
    public let boundHTTP2 = Readiness<ListenAddress>()
    /// The bound TLS address, when one was asked for.
    public let boundTLS = Readiness<ListenAddress>()
    /// Open connections on every listener, for what requests learn of theirs.
    let connections = ConnectionRegistry()
    /// The device share of the HTTP/1.1 port's connections, and of the TLS port's.
    let deviceSlots: DeviceSlots
    let tlsDeviceSlots: DeviceSlots?
    /// How busy and how late the servers' event loops are, for `/admin/stats`.
    let loopLoad = LoopLoadMonitor()

    public init(service: PushService, configuration: Configuration = .init()) {
        self.service = service
        self.configuration = configuration
        self.deviceSlots = DeviceSlots(cap: configuration.deviceCap, port: "the push port")
        self.tlsDeviceSlots = configuration.tlsDeviceCap.map { DeviceSlots(cap: $0, port: "the TLS port") }
        self.hub = configuration.hub.map {
            NotificationHub(settings: $0, delivery: HubDelivery(service: service, fcmProject: "pushfleet"), spans: configuration.hubSpans)
        }
    }

    /// The one router every listener serves: whatever is mounted here is reachable on each.
    func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        OAuthEndpoints(authority: service.authority).register(on: router)
        APNsEndpoint(service: service).register(on: router)
        FCMEndpoint(service: service).register(on: router)
        WNSEndpoint(service: service).register(on: router)
        WebPushEndpoint(service: service).register(on: router)
        AdminEndpoint(
            service: service, token: configuration.adminToken, deviceSlots: [deviceSlots] + [tlsDeviceSlots].compactMap { $0 }, loopLoad: loopLoad
        )
            .register(on: router)
        DeviceGateway(service: service).register(on: router)
        // `/{hub}/…` matches only what the constant first segments above leave.
        if let hub { HubEndpoint(hub: hub).register(on: router) }
        return router
    }

    /// The services to run (in a `ServiceGroup`, or one by one with `runService()`).
    public func makeServices(logger: Logger) -> [any Service] {
        let router = makeRouter()
        let connections = self.connections
        let limits = configuration.limits
        var services: [any Service] = [
            loopLoad,
            application(router, configuration.listen, limits, name: "pushfleet-mock-push", bound: bound, logger: logger) { responder, cap in
                GuardedChildChannel(
                    webSocketChannel(connections.tracking(responder), limits: limits, slots: deviceSlots),
                    limits: limits,
                    cap: cap,
                    connections: connections,
                    fastRoutes: ProviderRoutes(service: service, connections: connections)
                )
            }
        ]
        if let h2 = configuration.http2Listen {
            let h2Limits = configuration.http2Limits
            services.append(
                application(router, h2, h2Limits, name: "pushfleet-mock-push-h2", bound: boundHTTP2, logger: logger) { responder, cap in
                    GuardedChildChannel(
                        http2Channel(connections.tracking(responder), limits: h2Limits),
                        limits: h2Limits,
                        cap: cap,
                        connections: connections
                    )
                }
            )
        }
        if let tls = configuration.tls, let tlsDeviceSlots {
            services.append(
                application(
                    router, tls.listen, tls.limits, name: "pushfleet-mock-push-tls", bound: boundTLS, logger: logger,
                    onBound: { [service] in service.tlsPort.store($0.port, ordering: .relaxed) }
                ) { responder, cap in
                    let tracked = connections.tracking(responder)
                    var anyClient = false
                    if case .optional(nil) = tls.clientCertificates { anyClient = true }
                    return GuardedChildChannel(
                        try TLSServerChannel(
                            configuration: try tls.identity.serverConfiguration(clientCertificates: tls.clientCertificates),
                            acceptAnyClientCertificate: anyClient,
                            http1: webSocketChannel(tracked, limits: tls.limits, slots: tlsDeviceSlots),
                            http2: http2Channel(tracked, limits: tls.limits),
                            connections: connections,
                            limits: tls.limits
                        ),
                        limits: tls.limits,
                        cap: cap,
                        connections: connections,
                        isTLS: true,
                        fastRoutes: ProviderRoutes(service: service, connections: connections)
                    )
                }
            )
        }
        return services
    }

    /// HTTP/1.1 with the device gateway's WebSocket upgrade; upgrades count against `slots`.
    private func webSocketChannel(
        _ responder: @escaping HTTPChannelHandler.Responder, limits: ServerLimits, slots: DeviceSlots
    ) -> HTTP1WebSocketUpgradeChannel {
        let gateway = DeviceGateway(service: service)
        return HTTP1WebSocketUpgradeChannel(
            responder: responder,
            configuration: .init(
                http1: limits.http1Configuration(routes: ProviderRoutes(service: service, connections: connections)),
                ws: .init(maxFrameSize: DeviceGateway.maxInboundMessage, autoPing: .enabled(timePeriod: configuration.gatewayPing))
            ),
            // Synchronous: decided on the event loop, with no task per upgrade.
            shouldUpgrade: { @Sendable (head: HTTPRequest, channel: any Channel, logger: Logger) throws in
                let decision = gateway.shouldUpgrade(head, channel: channel)
                // A valid device upgrade past the cap has been answered 503 and is closing.
                guard case .upgrade = decision, DeviceGateway.isDevice(head), !slots.admit(channel, logger: logger) else { return decision }
                return .dontUpgrade
            }
        )
    }

    private func http2Channel(_ responder: @escaping HTTPChannelHandler.Responder, limits: ServerLimits) -> HTTP2RoutesChannel {
        HTTP2RoutesChannel(responder: responder, routes: ProviderRoutes(service: service, connections: connections), limits: limits)
    }

    private func application(
        _ router: Router<BasicRequestContext>,
        _ listen: ListenAddress,
        _ limits: ServerLimits,
        name: String,
        bound: Readiness<ListenAddress>,
        logger: Logger,
        onBound: @escaping @Sendable (ListenAddress) -> Void = { _ in },
        channel: @escaping @Sendable (@escaping HTTPChannelHandler.Responder, ConnectionCap) throws -> any ServerChildChannel
    ) -> some Service {
        let cap = limits.connectionCap()
        return Application(
            router: router,
            server: HTTPServerBuilder { responder in try channel(responder, cap) },
            configuration: .init(
                address: .hostname(listen.host, port: listen.port),
                serverName: name,
                backlog: configuration.backlog,
                availableConnectionsDelegate: cap
            ),
            onServerRunning: { channel in
                let address = Self.boundAddress(channel, fallback: listen)
                onBound(address)
                bound.succeed(address)
            },
            logger: logger
        )
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
