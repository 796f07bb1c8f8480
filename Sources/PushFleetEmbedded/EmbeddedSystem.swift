public import Logging
public import PushFleetBackend
public import PushFleetMockPush
public import ServiceLifecycle
import PushFleetServerSupport

/// The system under test that ships with pushfleet: the reference backend sending to the mock
/// push service, both in this process on loopback ports.
public struct EmbeddedSystem: Sendable {
    public struct Configuration: Sendable {
        public var backend: BackendConfiguration
        public var pushService: PushService.Configuration
        public var pushServer: MockPushServer.Configuration
        /// Send to this push service instead of starting the embedded one.
        public var externalPushServiceURL: String?

        public init(
            backend: BackendConfiguration = .init(),
            pushService: PushService.Configuration = .init(),
            pushServer: MockPushServer.Configuration = .init(),
            externalPushServiceURL: String? = nil
        ) {
            self.backend = backend
            self.pushService = pushService
            self.pushServer = pushServer
            self.externalPushServiceURL = externalPushServiceURL
        }
    }

    /// Where the running servers listen.
    public struct Endpoints: Sendable, Equatable {
        /// The backend's base URL.
        public var backend: String
        /// The push service's base URL (provider endpoints, admin, device gateway).
        public var pushService: String
        /// The push service's HTTP/2 cleartext base URL, when one was asked for.
        public var pushServiceHTTP2: String?
    }

    public let configuration: Configuration
    public let backend: ReferenceBackend
    /// Nil when an external push service is used.
    public let pushServer: MockPushServer?

    public init(configuration: Configuration) {
        var configuration = configuration
        // The device gateway holds a socket per device: half of the descriptors; the backend
        // and the h2c port share the rest.
        let embeddedPush = configuration.externalPushServiceURL == nil
        let h2 = embeddedPush && configuration.pushServer.http2Listen != nil
        configuration.backend.server = configuration.backend.server.resolved(share: embeddedPush ? (h2 ? 0.25 : 0.5) : 1)
        configuration.pushServer.limits = configuration.pushServer.limits.resolved(share: 0.5)
        configuration.pushServer.http2Limits = configuration.pushServer.http2Limits.resolved(share: 0.25)
        self.configuration = configuration
        let pushServer: MockPushServer? =
            configuration.externalPushServiceURL == nil
            ? MockPushServer(service: PushService(configuration: configuration.pushService), configuration: configuration.pushServer)
            : nil
        self.pushServer = pushServer
        let external = configuration.externalPushServiceURL
        self.backend = ReferenceBackend(configuration: configuration.backend) {
            if let external { return external }
            return try await pushServer!.bound.value().httpURL
        }
    }

    /// The services to run together, push service first.
    public func makeServices(logger: Logger) -> [any Service] {
        (pushServer?.makeServices(logger: logger) ?? []) + [backend.makeService(logger: logger)]
    }

    /// Waits until every server listens.
    public func endpoints() async throws -> Endpoints {
        let backendURL = try await backend.bound.value().httpURL
        guard let pushServer else {
            return Endpoints(backend: backendURL, pushService: configuration.externalPushServiceURL ?? "")
        }
        let http2 = configuration.pushServer.http2Listen == nil ? nil : try await pushServer.boundHTTP2.value().httpURL
        return Endpoints(backend: backendURL, pushService: try await pushServer.bound.value().httpURL, pushServiceHTTP2: http2)
    }

    /// Runs the system for the duration of `body`, then shuts it down gracefully.
    public static func withRunning<T: Sendable>(
        _ configuration: Configuration = .init(),
        logger: Logger = Logger(label: "pushfleet.embedded"),
        _ body: @escaping @Sendable (EmbeddedSystem, Endpoints) async throws -> T
    ) async throws -> T {
        let system = EmbeddedSystem(configuration: configuration)
        let group = ServiceGroup(
            configuration: .init(services: system.makeServices(logger: logger).map { .init(service: $0) }, logger: logger)
        )
        return try await withThrowingTaskGroup(of: T?.self) { tasks in
            tasks.addTask {
                try await group.run()
                return nil
            }
            tasks.addTask {
                let endpoints = try await system.endpoints()
                return try await body(system, endpoints)
            }
            // Either the body finishes, or the servers stop first (a bind failure): both end the run.
            defer { tasks.cancelAll() }
            guard let value = try await tasks.next() ?? nil else { throw ServerStoppedError() }
            await group.triggerGracefulShutdown()
            // Give the servers a moment to close cleanly, then stop waiting.
            tasks.addTask {
                try await Task.sleep(for: .seconds(5))
                return nil
            }
            _ = try? await tasks.next()
            return value
        }
    }

    public struct ServerStoppedError: Error, CustomStringConvertible {
        public init() {}
        public var description: String { "the embedded servers stopped before the work was done" }
    }
}
