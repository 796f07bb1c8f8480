public import PushFleetWire
public import PushFleetCore
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
    /// The push service's other listeners a backend may send to (h2c, TLS), as URLs: network
    /// faults on the backend's link match them too.
    public var pushServiceListeners: [String] = []
    /// The push service's admin token, when it has one.
    public var pushAdminToken: String?
    /// Stops the backend, keeps it down that long and starts it again; nil when the run did not
    /// start the backend.
    public var restartBackend: (@Sendable (Duration) async throws -> Void)?
    /// The backend's injected latencies; nil when the run did not start the backend.
    public var backendLatency: (any BackendLatencyControl)?
    /// The push service, when the run started it in this process: watched in process. Otherwise
    /// the run watches it over `/observe` when it is pushfleet's (docs/reports.md, "Why lost").
    public var pushWatch: (any PushServiceWatching)?

    public init(
        backend: String, pushService: String, pushServiceListeners: [String] = [], pushAdminToken: String? = nil,
        restartBackend: (@Sendable (Duration) async throws -> Void)? = nil, backendLatency: (any BackendLatencyControl)? = nil,
        pushWatch: (any PushServiceWatching)? = nil
    ) {
        self.pushWatch = pushWatch
        self.backend = backend
        self.pushService = pushService
        self.pushServiceListeners = pushServiceListeners
        self.pushAdminToken = pushAdminToken
        self.restartBackend = restartBackend
        self.backendLatency = backendLatency
    }
}

