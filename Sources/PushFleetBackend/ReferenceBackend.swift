import AsyncHTTPClient
import Crypto
import PushFleetWebPush
import NIOSSL
import Foundation
import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
import NIOPosix
import PushFleetCore
import PushFleetHub
public import PushFleetServerSupport
public import PushFleetWire
public import ServiceLifecycle
import Synchronization

/// The reference AppBackend: the seeds' register and notification API with their holes closed
/// (see docs/backend.md), in front of a hub with a tag index that sends to the push service.
public final class ReferenceBackend: Sendable {
    public let configuration: BackendConfiguration
    /// The bound address, known once the server listens.
    public let bound = Readiness<ListenAddress>()

    let storeHandle: StoreHandle
    let counters = BackendCounters()
    let signer: TokenSigner
    let verifiedTokens = VerifiedTokens()
    /// Basic `Authorization` values the user directory accepted, whole, each with its user: the
    /// directory never changes, so a value accepted once is accepted again.
    let verifiedBasic = VerifiedTokens()
    let client: HTTPClient
    let transport: ProviderTransport
    let sender: PushSender
    /// Set when sends go through a notification hub.
    let hubSender: HubSender?
    private let sweep = Mutex(ExpirySweep())
    let health = Mutex(StoreHealth())
    /// The logger the service was made with, for the store's failures.
    let logger = Mutex(Logger(label: "pushfleet.backend"))

    /// - Parameters:
    ///   - configuration: listen address, auth, TTLs, limits.
    ///   - pushServiceURL: the push service's base URL, asked for on first send (the embedded
    ///     push service may still be binding when the backend is built).
    public convenience init(configuration: BackendConfiguration, pushServiceURL: @escaping @Sendable () async throws -> String) {
        self.init(configuration: configuration, pushServiceURL: pushServiceURL) { try await Self.openStore(configuration) }
    }

    /// - Parameter openStore: opens the store on first use (a test opens one with its own settings).
    init(
        configuration: BackendConfiguration, pushServiceURL: @escaping @Sendable () async throws -> String,
        openStore: @escaping @Sendable () async throws -> any BackendStore
    ) {
        self.configuration = configuration
        self.storeHandle = StoreHandle(openStore)
        let secret = configuration.tokenSecret ?? Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        self.signer = TokenSigner(secret: secret, lifetime: configuration.tokenLifetime)
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.connectionPool = .init(
            idleTimeout: .seconds(60),
            concurrentHTTP1ConnectionsPerHostSoftLimit: configuration.pushServiceConnections
        )
        clientConfiguration.timeout = .init(connect: .seconds(5), read: .seconds(30))
        // No tracer: with the default one (a no-op) the client still built a span's attributes for
        // every push, ~2% of `serve`'s CPU per secure push.
        clientConfiguration.tracing.tracer = nil
        if let roots = configuration.pushServiceTrustRootsPEM {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.certificates((try? NIOSSLCertificate.fromPEMBytes(Array(roots.utf8))) ?? [])]
            clientConfiguration.tlsConfiguration = tls
        }
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: clientConfiguration)
        self.client = client
        let transport = ProviderTransport(client: client, maxConnections: configuration.pushServiceConnections)
        self.transport = transport
        self.sender = PushSender(
            transport: transport,
            settings: .init(
                apnsTopic: configuration.apnsTopic,
                fcmProject: configuration.fcmProject,
                maxAttempts: configuration.pushAttempts,
                backoff: configuration.pushBackoff,
                requestTimeout: .seconds(30)
            ),
            credentials: ProviderCredentials(
                settings: .init(
                    apnsKeyID: configuration.apnsKeyID, apnsTeamID: configuration.apnsTeamID, apnsKeyPEM: configuration.apnsKeyPEM,
                    fcmProject: configuration.fcmProject, wnsClientID: configuration.wnsClientID,
                    wnsClientSecret: configuration.wnsClientSecret
                ),
                client: client,
                baseURL: pushServiceURL
            ),
            baseURL: pushServiceURL,
            counters: counters,
            vapid: VAPIDSigner(key: configuration.vapidKey ?? .init(), subject: "mailto:pushfleet@example.com")
        )
        self.hubSender = configuration.hub.map { hub in
            HubSender(
                client: client, connection: hub, hubName: hub.entityPath ?? "",
                baseURL: configuration.hubAtPushService ? pushServiceURL : { @Sendable in hub.baseURL }, requestTimeout: .seconds(30),
                maxAttempts: configuration.pushAttempts
            )
        }
    }

    /// Convenience for a push service at a known URL.
    public convenience init(configuration: BackendConfiguration, pushServiceURL: String) {
        self.init(configuration: configuration, pushServiceURL: { pushServiceURL })
    }

    /// The counters, and the store's counts when it can be read: `/stats` keeps answering while
    /// the store fails, since that is when its failure counts matter.
    public func stats() async throws -> BackendStats {
        var stats = counters.snapshot
        if let counts = try? await storeHandle.get().counts() {
            stats.registrations = counts.registrations
            stats.storedNotifications = counts.notifications
        }
        return stats
    }

    static func openStore(_ configuration: BackendConfiguration) async throws -> any BackendStore {
        switch configuration.store {
        case .memory:
            return MemoryStore(
                registrationTTL: configuration.registrationTTL, notificationTTL: configuration.notificationTTL, limits: configuration.storeLimits
            )
        case .sqlite(let path):
            return try await SQLiteStore.open(path: path, configuration: configuration)
        case .postgres(let url):
            return try await PostgresStore.open(url: url, configuration: configuration)
        }
    }

    func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: InjectedLatencyMiddleware(faults: configuration.faults))
        router.add(middleware: TraceContextMiddleware(spans: configuration.spans))
        router.get("/health") { _, _ in "ok" }
        router.get("/stats") { _, _ in Response.json(try await self.stats()) }
        let api = router.group("api")
        addLoginRoute(to: api)
        addRegisterRoutes(to: api)
        addNotificationRoutes(to: api)
        return router
    }

    /// The backend as a service: serves until graceful shutdown, then closes its client.
    public func makeService(logger: Logger) -> any Service {
        self.logger.withLock { $0 = logger }
        let bound = self.bound
        let listen = configuration.listen
        var routed = configuration.server
        // The routes' own caps, refused as they are declared: a client that declares more and
        // stalls is not held until the body timeout.
        let bodies = configuration.limits
        routed.routeBodyLimits = [
            RouteBodyLimit(method: "POST", pathPrefix: "/api/notifications/rich", maxBytes: bodies.maxRichBodyBytes),
            RouteBodyLimit(method: "POST", pathPrefix: "/api/notifications", maxBytes: bodies.maxBodyBytes),
            RouteBodyLimit(method: "PUT", pathPrefix: "/api/register/", maxBytes: bodies.maxBodyBytes),
        ]
        let limits = routed
        let cap = limits.connectionCap()
        let routes = BackendRoutes(backend: self)
        let app = Application(
            router: makeRouter(),
            server: HTTPServerBuilder { responder in
                // The fetches and secure sends are answered from the bytes (HTTP1FastPath); the
                // router's requests are lent to Hummingbird's pipeline one at a time.
                GuardedChildChannel(
                    HTTP1Channel(responder: responder, configuration: limits.http1Configuration(routes: routes, fastPathAhead: true)),
                    limits: limits, cap: cap, fastRoutes: routes, lends: true
                )
            },
            configuration: .init(
                address: .hostname(listen.host, port: listen.port),
                serverName: "pushfleet-backend",
                backlog: configuration.backlog,
                availableConnectionsDelegate: cap
            ),
            onServerRunning: { channel in
                bound.succeed(ListenAddress(host: listen.host, port: channel.localAddress?.port ?? listen.port))
            },
            logger: logger
        )
        return BackendService(app: app, client: client, transport: transport, bound: bound, store: storeHandle)
    }

    /// Opens the configured store once and closes it: a store that cannot be reached fails
    /// `pushfleet serve` at start rather than every request later.
    public static func checkStore(_ configuration: BackendConfiguration) async throws {
        let store = try await openStore(configuration)
        _ = try await store.counts()
        await store.close()
    }

    /// Drops expired registrations and notifications at most every 30 s, from request handling,
    /// so memory stays bounded without a background task.
    func sweepIfDue(now: Int64) async {
        guard sweep.withLock({ $0.isDue(now: now, interval: 30_000_000_000) }) else { return }
        try? await storeHandle.get().sweep(now: now)
    }

    /// The same on the event loop, for the in-memory store.
    func sweepIfDue(now: Int64, store: MemoryStore) {
        guard sweep.withLock({ $0.isDue(now: now, interval: 30_000_000_000) }) else { return }
        store.sweep(now: now)
    }
}

private struct BackendService: Service {
    let app: Application<RouterResponder<BasicRequestContext>>
    let client: HTTPClient
    let transport: ProviderTransport
    let bound: Readiness<ListenAddress>
    let store: StoreHandle

    func run() async throws {
        do {
            try await app.run()
        } catch {
            bound.fail(error)
            await transport.shutdown()
            try? await client.shutdown()
            await store.close()
            throw error
        }
        await transport.shutdown()
        try await client.shutdown()
        await store.close()
    }
}
