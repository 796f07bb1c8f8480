/// A validated scenario: everything one run does. Built by the Scenario module from YAML; the
/// schema is documented key by key in docs/scenarios.md.
public struct Scenario: Sendable, Equatable {
    public var name: String
    public var seed: UInt64
    public var target: Target
    public var auth: AuthMode
    public var fleet: Fleet
    public var lifecycle: Set<LifecycleStep>
    public var timeouts: Timeouts
    public var traffic: [Traffic]
    /// A push received this long after its send started counts as late, not delivered.
    public var deadline: Duration
    /// How long after the last send the run keeps listening for late pushes before calling the
    /// rest lost.
    public var grace: Duration
    /// A push this long after its send's answer is never credited: its pair is lost and the push
    /// stale. Sends settled for good are judged and let go of once it has passed, so a long run's
    /// memory stays flat (docs/design.md, "Folding").
    public var horizon: Duration = .seconds(600)
    /// Share of devices that also probe for leaks.
    public var leakProbeShare: Double
    public var thresholds: [Threshold]
    /// Metrics the scenario gives thresholds for (an empty list included): each replaces the
    /// default gate's rule for that metric.
    public var thresholdMetrics: Set<String> = []
    public var faults: [FaultStep]
    public var embedded: EmbeddedOptions
    /// How a fetched rich content is judged.
    public var richContent: RichContentCheck = .served
    /// The backend's API; the loader always sets one (the `appbackend` preset by default). A
    /// scenario built in code without one cannot run.
    public var api: APIDescription?
    /// After the last send, the run ends once every expected pair is settled and no push has
    /// arrived for this long (or at the deadline).
    public var quietPeriod: Duration = .milliseconds(500)
    /// How `pushfleet capacity` searches; nil when the scenario has no `capacity:` section.
    public var capacity: Capacity?
    public var tracing = Tracing()
    /// Faults on the network links, and the devices' keepalive.
    public var network = Network()

    /// W3C Trace Context on the run's requests (docs/tracing.md).
    public struct Tracing: Sendable, Equatable {
        /// Whether every request carries `traceparent`: a send's starts its push's trace, a
        /// device's request its own.
        public var propagate = true
        /// The share of delivered pairs whose traces a run keeps beside its incidents' (every
        /// incident's is kept), decided by the send's trace id so that every shard agrees.
        public var sample = 0.01

        public init(propagate: Bool = true, sample: Double = 0.01) {
            self.propagate = propagate
            self.sample = sample
        }

        /// Whether a send's delivered pairs are in the sample.
        public func samples(_ trace: TraceIdentity) -> Bool {
            sample > 0 && Double(trace.low >> 11) * 0x1p-53 < sample
        }
    }

    public enum RichContentCheck: String, Sendable, Equatable, CaseIterable {
        /// By the id the push names and the recipient it is served to: any bytes will do.
        case served
        /// The backend returns the very bytes the client sent, which name send and recipient.
        case echo
    }

    /// The rules the run is judged by: the scenario's thresholds, plus the default gate's rule
    /// for every metric the scenario does not name.
    public var effectiveThresholds: [Threshold] {
        thresholds + DefaultGate.rules.filter { !thresholdMetrics.contains($0.metric) }
    }

    public init(
        name: String,
        seed: UInt64 = 1,
        target: Target = .embedded,
        auth: AuthMode = .basic,
        fleet: Fleet,
        lifecycle: Set<LifecycleStep> = Set(LifecycleStep.allCases),
        timeouts: Timeouts = .init(),
        traffic: [Traffic] = [],
        deadline: Duration = .seconds(5),
        grace: Duration = .seconds(2),
        leakProbeShare: Double = 0,
        thresholds: [Threshold] = [],
        faults: [FaultStep] = [],
        embedded: EmbeddedOptions = .init()
    ) {
        self.name = name
        self.seed = seed
        self.target = target
        self.auth = auth
        self.fleet = fleet
        self.lifecycle = lifecycle
        self.timeouts = timeouts
        self.traffic = traffic
        self.deadline = deadline
        self.grace = grace
        self.leakProbeShare = leakProbeShare
        self.thresholds = thresholds
        self.faults = faults
        self.embedded = embedded
    }

    public enum Target: Sendable, Equatable {
        /// Start the reference backend and the mock push service in-process.
        case embedded
        /// An external backend; the push service is external too, or embedded and listening
        /// where the external backend was told to send.
        case external(backend: String, pushService: PushServiceTarget)
    }

    public enum PushServiceTarget: Sendable, Equatable {
        case url(String)
        case embedded(listen: String)
    }

    public enum AuthMode: String, Sendable, Equatable, CaseIterable {
        /// Basic credentials on every call (the seed's way); login costs no request.
        case basic
        /// `POST /api/login` once per device, then Bearer; a 401 triggers one re-login.
        case token
    }

    public enum LifecycleStep: String, Sendable, Equatable, CaseIterable, Comparable {
        case login, register, connect, receive, fetchSecure = "fetch_secure", fetchRich = "fetch_rich"

        public static func < (a: Self, b: Self) -> Bool {
            allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
        }
    }

    public struct Timeouts: Sendable, Equatable {
        public var login: Duration = .seconds(10)
        public var register: Duration = .seconds(10)
        public var connect: Duration = .seconds(10)
        public var send: Duration = .seconds(10)
        public var fetch: Duration = .seconds(10)

        public init() {}
    }

    public struct Fleet: Sendable, Equatable {
        /// The most devices a fleet may plan (users × the most devices per user): a plan holds
        /// every device in memory, at about 150 bytes each.
        public static let maximumDevices = 10_000_000

        public var users: Int
        public var devicesPerUser: DeviceCount
        /// Platform weights; shares are weight / sum.
        public var platforms: [PlatformName: Double]
        /// Device arrivals; nil means all at once.
        public var arrival: LoadProfile?
        public var pushChannel: PushChannel
        public var http: HTTPMode
        /// Connections of the shared HTTP pool.
        public var connections: Int
        /// Share of devices that unregister and disconnect before traffic ends.
        public var departure: Departure?
        /// User names and passwords; nil means user1…userN with the demo rule.
        public var names = FleetNames()
        /// Local addresses the fleet's sockets bind to in turn, so that one push service or
        /// backend can take more connections than one source address has ephemeral ports.
        /// Empty: the system picks, spreading over 127.0.0.x by itself when a loopback target
        /// needs it.
        public var sourceAddresses: [String] = []
        /// Each ready device renews its registration this often (PUT of its id; on 410 a new
        /// one), as apps do at every launch; nil for never. Devices also renew after their push
        /// channel reconnects.
        public var reregisterEvery: Duration?

        public init(
            users: Int,
            devicesPerUser: DeviceCount = .fixed(1),
            platforms: [PlatformName: Double] = [.apns: 1],
            arrival: LoadProfile? = nil,
            pushChannel: PushChannel = .perDevice,
            http: HTTPMode = .pooled,
            connections: Int = 64,
            departure: Departure? = nil
        ) {
            self.users = users
            self.devicesPerUser = devicesPerUser
            self.platforms = platforms
            self.arrival = arrival
            self.pushChannel = pushChannel
            self.http = http
            self.connections = connections
            self.departure = departure
        }
    }

    public struct Departure: Sendable, Equatable {
        public var share: Double
        /// When, from the start of traffic.
        public var at: Duration

        public init(share: Double, at: Duration) {
            self.share = share
            self.at = at
        }
    }

    public enum DeviceCount: Sendable, Equatable {
        case fixed(Int)
        /// Uniform between the bounds, inclusive.
        case uniform(min: Int, max: Int)

        public var maximum: Int {
            switch self {
            case .fixed(let n): n
            case .uniform(_, let high): high
            }
        }
    }

    public enum PlatformName: String, Sendable, Equatable, CaseIterable, Comparable {
        case apns, fcm, wns, webpush

        public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    }

    public enum PushChannel: String, Sendable, Equatable, CaseIterable {
        case perDevice = "per_device"
        case multiplexed
    }

    public enum HTTPMode: String, Sendable, Equatable, CaseIterable {
        case pooled
        case perDevice = "per_device"
    }

    public struct Traffic: Sendable, Equatable {
        /// The most sends one sender may plan: a run computes every intended start up front, 8
        /// bytes each.
        public static let maximumSends = 100_000_000

        public enum Kind: String, Sendable, Equatable, CaseIterable {
            case plain, secure, rich
        }

        public enum Party: Sendable, Equatable {
            case randomUser
            /// The sender itself (`to` only).
            case selfUser
            case user(String)
            case group([String])
        }

        public var name: String
        public var kind: Kind
        public var from: Party
        public var to: Party
        /// The platforms a plain send goes to, one call per platform; also those of a secure or
        /// rich send the api makes per platform (``Scenario/targetedPlatforms(of:)``).
        public var platforms: [PlatformName]
        public var profile: LoadProfile
        /// When this sender starts, from the start of traffic.
        public var start: Duration
        /// Sends allowed in flight at once; a send due while this many are open is dropped and
        /// counted.
        public var maxInFlight: Int

        public init(
            name: String,
            kind: Kind,
            from: Party = .randomUser,
            to: Party = .randomUser,
            platforms: [PlatformName] = PlatformName.allCases,
            profile: LoadProfile,
            start: Duration = .zero,
            maxInFlight: Int = 2000
        ) {
            self.name = name
            self.kind = kind
            self.from = from
            self.to = to
            self.platforms = platforms
            self.profile = profile
            self.start = start
            self.maxInFlight = maxInFlight
        }
    }

    /// A change to the push service at a time from the start of traffic.
    public struct FaultStep: Sendable, Equatable {
        public var at: Duration
        /// Knobs to set, as the push service's `/admin/faults` JSON takes them; nil leaves them.
        public var drop: Double?
        public var throttle: Double?
        public var latency: LatencySpec?
        public var unregisteredRatio: Double?
        /// Share of online devices to disconnect at that moment.
        public var disconnect: Double?
        /// Something done to the embedded backend.
        public var backend: BackendFault?
        /// Latency the embedded backend adds to its sends and fetches; `.none` clears one.
        public var backendSendLatency: LatencySpec?
        public var backendFetchLatency: LatencySpec?
        /// The push service's service rate (pushes/s) and its queue: a capacity known in advance.
        public var serviceRate: Rate?
        public var serviceQueue: Int?
        /// The embedded backend's send rate (sends/s) and its queue.
        public var backendSendRate: Rate?
        public var backendSendQueue: Int?

        /// What a service-rate knob may be set to, per second.
        public static let serviceRateRange: ClosedRange<Double> = 0.001...10_000_000
        public static let serviceQueueRange: ClosedRange<Int> = 1...10_000_000

        public init(
            at: Duration,
            drop: Double? = nil,
            throttle: Double? = nil,
            latency: LatencySpec? = nil,
            unregisteredRatio: Double? = nil,
            disconnect: Double? = nil,
            backend: BackendFault? = nil
        ) {
            self.at = at
            self.drop = drop
            self.throttle = throttle
            self.latency = latency
            self.unregisteredRatio = unregisteredRatio
            self.disconnect = disconnect
            self.backend = backend
        }
    }

    public enum BackendFault: Sendable, Equatable {
        /// The backend process stops, stays down this long, and starts again on the same port
        /// with the same store (an in-memory store starts empty, as a real restart would).
        case restart(downFor: Duration)
    }

    public enum LatencySpec: Sendable, Equatable {
        case none
        case fixed(Duration)
        case uniform(min: Duration, max: Duration)
        case normal(mean: Duration, stddev: Duration)
    }

    /// Settings of the embedded system under test.
    public struct EmbeddedOptions: Sendable, Equatable {
        /// Lifetimes of registrations, stored notifications and login tokens a backend takes:
        /// expiries are instants in nanoseconds since 1970, which a lifetime past about 230 years
        /// would carry beyond Int64, and a token lives whole seconds.
        public static let lifetimeRange: ClosedRange<Duration> = .seconds(1)...(.seconds(3650 * 86_400))

        public var registrationTTL: Duration = .seconds(86_400)
        /// Where the embedded backend keeps registrations and notifications.
        public var store: StoreLocation = .memory
        /// The embedded backend sends through the notification hub the embedded push service
        /// serves, instead of to the push service directly.
        public var hub = false
        /// The embedded push service also listens with TLS, and the embedded backend sends to it
        /// over HTTP/2 with provider credentials; nil for cleartext only.
        public var tls: TLS?

        public init() {}

        /// The embedded push service's TLS listener.
        public struct TLS: Sendable, Equatable {
            /// HOST:PORT; port 0 for any free port.
            public var listen = "127.0.0.1:0"
            /// Names the generated certificate is for.
            public var names = TLSNames.defaults
            /// Where to write the generated CA (PEM), for clients outside the run; nil: not written.
            public var caFile: String?

            public init() {}
        }
    }

    /// Every platform a send of this traffic can reach: one call per listed platform for plain
    /// sends and sends the api makes per platform (only those it has requests for, when it
    /// names them), one call reaching every platform of the fleet otherwise.
    public func targetedPlatforms(of traffic: Traffic) -> [PlatformName] {
        guard let step = api?.send[traffic.kind], step.callsPerPlatform else {
            return traffic.kind == .plain ? traffic.platforms : fleetPlatforms
        }
        return traffic.platforms.filter { step.on($0) != nil }
    }

    /// The platforms the fleet has devices on, in `PlatformName.allCases` order: a send that
    /// reaches every platform reaches these (a report shows no column for the others).
    public var fleetPlatforms: [PlatformName] {
        let present = PlatformName.allCases.filter { (fleet.platforms[$0] ?? 0) > 0 }
        return present.isEmpty ? PlatformName.allCases : present
    }
}
