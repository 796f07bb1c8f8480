public import Crypto
public import Foundation
public import PushFleetCore
public import PushFleetHub
public import PushFleetServerSupport

/// Everything the reference backend is started with.
public struct BackendConfiguration: Sendable {
    /// Request limits; exceeding one is a 4xx, never a crash.
    public struct Limits: Sendable {
        /// Tags per registration (the notification hub's limit).
        public var maxTags = 60
        public var maxTagLength = 120
        public var maxHandleLength = 1024
        /// Body of every call but the rich send.
        public var maxBodyBytes = 64 * 1024
        /// A plain message, so that its native payload stays within the push services' 4 KB.
        public var maxMessageBytes = 2000
        /// Body of a rich send (the image travels base64-encoded).
        public var maxRichBodyBytes = 2 * 1024 * 1024

        public init() {}
    }

    public var listen: ListenAddress
    public var users: UserDirectory
    /// A registration id lives this long after its last create or update; then it is gone (410).
    public var registrationTTL: Duration
    /// The wall clock (ns since the epoch) registrations and notifications expire by: tests drive
    /// expiry with a manual one.
    public var clock: @Sendable () -> Int64 = WallClock.nanoseconds
    /// Secure and rich notifications are readable this long.
    public var notificationTTL: Duration
    public var tokenLifetime: Duration
    /// HMAC key for login tokens; random per start when nil (tokens then die with the process).
    public var tokenSecret: Data?
    public var limits: Limits
    public var apnsTopic: String
    public var fcmProject: String
    /// The APNs signing key's id and team, and the key (a `.p8` file's PEM; nil: made at start).
    public var apnsKeyID = "PFKEY00001"
    public var apnsTeamID = "PFTEAM0001"
    public var apnsKeyPEM: String?
    /// The VAPID key Web Push is signed with, and whose public half browsers subscribe with;
    /// made at start when nil. Behind a hub, the hub's browser credential.
    public var vapidKey: P256.Signing.PrivateKey?
    /// The WNS client (package SID and secret) the backend authenticates as.
    public var wnsClientID = "ms-app://s-1-15-2-pushfleet-backend"
    public var wnsClientSecret = "pushfleet-backend-secret"
    /// CA certificates (PEM) to trust for an https push service, beside the system's.
    public var pushServiceTrustRootsPEM: String?
    /// Connections to the push service the backend keeps (its pool size).
    public var pushServiceConnections: Int
    /// Attempts per push to the push service, the first included.
    public var pushAttempts: Int
    public var pushBackoff: Duration
    public var backlog: Int
    /// Where registrations and notifications are kept, and how many at most.
    public var store: StoreLocation = .memory
    public var storeLimits = StoreLimits()
    /// How long a unit of work on a PostgreSQL store may take, waiting for a pooled connection
    /// included: with the server gone the pool keeps reconnecting, and a request answers 503
    /// `store_unreachable` after this long instead of waiting indefinitely.
    public var storeDeadline: Duration = .seconds(5)
    /// Timeouts and the connection cap of the backend's port.
    public var server = ServerLimits()
    /// Latency added to sends and fetches (fault scenarios); shared across restarts.
    public var faults = BackendFaults()
    /// Send through this notification hub instead of to the push service directly; its
    /// `EntityPath` names the hub.
    public var hub: HubConnectionString?
    /// The hub is the one the push service serves: its address is the push service's.
    public var hubAtPushService = false
    /// Where the backend records its spans (a server span per request that came with a sampled
    /// trace context, its store calls, a client span per request to the push service or the
    /// hub); nil records none and hands the caller's context on as it came.
    public var spans: SpanRecorder?

    public init(
        listen: ListenAddress = .init(host: "127.0.0.1", port: 0),
        users: UserDirectory = .demo,
        registrationTTL: Duration = .seconds(86_400),
        notificationTTL: Duration = .seconds(86_400),
        tokenLifetime: Duration = .seconds(3600),
        tokenSecret: Data? = nil,
        limits: Limits = .init(),
        apnsTopic: String = "com.pushfleet.app",
        fcmProject: String = "pushfleet",
        pushServiceConnections: Int = 64,
        pushAttempts: Int = 4,
        pushBackoff: Duration = .milliseconds(20),
        backlog: Int = 4096
    ) {
        self.listen = listen
        self.users = users
        self.registrationTTL = registrationTTL
        self.notificationTTL = notificationTTL
        self.tokenLifetime = tokenLifetime
        self.tokenSecret = tokenSecret
        self.limits = limits
        self.apnsTopic = apnsTopic
        self.fcmProject = fcmProject
        self.pushServiceConnections = pushServiceConnections
        self.pushAttempts = pushAttempts
        self.pushBackoff = pushBackoff
        self.backlog = backlog
    }
}
