public import PushFleetWire
import PushFleetClients
import PushFleetMetrics

/// The system under test as the fleet sees it: where it listens, and what a run may do to it.
///
/// The engine never starts a backend or a push service; the launcher does, and hands over this.
public struct SystemUnderTest: Sendable {
    /// The backend's base URL.
    public var backend: String
    /// The push service's base URL (provider endpoints, device gateway, `/admin`).
    public var pushService: String
    /// The push service's admin token, when it has one.
    public var pushAdminToken: String?
    /// Stops the backend, keeps it down that long and starts it again; nil when the run did not
    /// start the backend.
    public var restartBackend: (@Sendable (Duration) async throws -> Void)?
    /// The backend's injected latencies; nil when the run did not start the backend.
    public var backendLatency: BackendLatencyControl?

    public init(
        backend: String, pushService: String, pushAdminToken: String? = nil,
        restartBackend: (@Sendable (Duration) async throws -> Void)? = nil, backendLatency: BackendLatencyControl? = nil
    ) {
        self.backend = backend
        self.pushService = pushService
        self.pushAdminToken = pushAdminToken
        self.restartBackend = restartBackend
        self.backendLatency = backendLatency
    }
}

/// Reads and replaces the latency a backend the run started adds to its sends and fetches.
public struct BackendLatencyControl: Sendable {
    public struct Settings: Sendable, Equatable {
        public var send: LatencyDistribution?
        public var fetch: LatencyDistribution?

        public init(send: LatencyDistribution? = nil, fetch: LatencyDistribution? = nil) {
            self.send = send
            self.fetch = fetch
        }
    }

    public let current: @Sendable () -> Settings
    public let replace: @Sendable (Settings) -> Void

    public init(current: @escaping @Sendable () -> Settings, replace: @escaping @Sendable (Settings) -> Void) {
        self.current = current
        self.replace = replace
    }
}
