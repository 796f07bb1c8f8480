extension Scenario {
    /// Faults on the run's network links, made by the kernel on real sockets
    /// (docs/network-faults.md), and how devices find a link dead.
    public struct Network: Sendable, Equatable {
        /// Devices ping the gateway and give up on a silent socket; nil: they never ping, as before.
        public var keepalive: Keepalive?
        public var faults: [NetworkFault] = []
        /// How often the embedded push service's gateway pings device sockets; nil: its default.
        public var gatewayPing: Duration?

        public init(keepalive: Keepalive? = nil, faults: [NetworkFault] = []) {
            self.keepalive = keepalive
            self.faults = faults
        }

        /// Whether the run faults the phone link at all.
        public var faultsPhoneLink: Bool { faults.contains { $0.link == .phone } }
        /// Whether the run faults any link.
        public var hasFaults: Bool { !faults.isEmpty }
        /// Whether a fault drops packets, which needs the kernel's packet filter.
        public var needsKernel: Bool { faults.contains(where: \.dropsPackets) }
        /// Whether a fault delays, which the run's proxy on the link does.
        public var needsProxy: Bool { faults.contains { !$0.dropsPackets } }
    }

    /// A device's own dead-link check, as a real client's heartbeat: a WebSocket ping every
    /// `ping`, and the socket given up (then reconnected) once nothing was heard for `deadAfter`.
    public struct Keepalive: Sendable, Equatable {
        public var ping: Duration
        public var deadAfter: Duration
        /// Whether the device acknowledges each push, so that the gateway holds again what a dead
        /// socket swallowed (as phones' push clients do); false for a client that never says.
        public var acks = true
        /// What a scenario may set: fast enough to test in seconds, slow enough for real phones.
        public static let range: ClosedRange<Duration> = .milliseconds(100) ... .seconds(3600)

        public init(ping: Duration, deadAfter: Duration, acks: Bool = true) {
            self.ping = ping
            self.deadAfter = deadAfter
            self.acks = acks
        }
    }

    /// One fault on one link, for a share of its devices, for a window from the start of traffic.
    public struct NetworkFault: Sendable, Equatable {
        public enum Link: String, Sendable, Equatable, CaseIterable {
            /// Devices' own sockets to the push service's gateway.
            case phone
            /// The backend's connections to the push service's provider endpoints.
            case backendPush = "backend_push"
            /// The fleet's requests to the backend (logins, registrations, sends, fetches).
            case fleetBackend = "fleet_backend"

            /// The partition directions that name this link's ends.
            public var directions: [Direction] {
                switch self {
                case .phone: [.both, .toDevice, .fromDevice]
                case .backendPush: [.both, .toPushService, .fromPushService]
                case .fleetBackend: [.both, .toBackend, .fromBackend]
                }
            }
        }

        public enum Direction: String, Sendable, Equatable, CaseIterable {
            /// Nothing passes either way.
            case both
            /// The gateway's packets to the device are lost; the device's still arrive.
            case toDevice = "to_device"
            /// The device's packets to the gateway are lost; the gateway's still arrive.
            case fromDevice = "from_device"
            /// The backend's packets to the push service are lost (requests vanish).
            case toPushService = "to_push_service"
            /// The push service's packets to the backend are lost (answers vanish).
            case fromPushService = "from_push_service"
            /// The fleet's packets to the backend are lost.
            case toBackend = "to_backend"
            /// The backend's packets to the fleet are lost.
            case fromBackend = "from_backend"
        }

        public enum Kind: Sendable, Equatable {
            /// Each packet either way is dropped with this probability (TCP retransmits).
            case loss(Double)
            /// A silent partition: packets dropped, no FIN, no RST, so sockets are left half-open.
            case partition(Direction)
            /// Every read either way is held back this long, give or take up to `jitter` (uniform),
            /// in order: the run's proxy on the link does it (no netem needed).
            case latency(Duration, jitter: Duration)
            /// Each direction of a connection carries at most this many bytes a second.
            case bandwidth(bytesPerSecond: Int)
            /// Each read is passed on in pieces of `size` bytes, `delay` apart.
            case slicer(size: Int, delay: Duration)
            /// A connection's close reaches the other end this much later.
            case slowClose(Duration)
            /// Nothing passes; the connection is closed after this long (never when zero).
            case timeout(Duration)
            /// The connection is reset (RST both ways) after this long.
            case resetPeer(Duration)

            /// Whether the run's proxy makes it (Toxiproxy's toxics), not the kernel.
            public var isToxic: Bool {
                switch self {
                case .loss, .partition: false
                case .latency, .bandwidth, .slicer, .slowClose, .timeout, .resetPeer: true
                }
            }
        }

        /// Down for `down`, then up for `up`, over and over within the window.
        public struct Flap: Sendable, Equatable {
            public var down: Duration
            public var up: Duration

            public init(down: Duration, up: Duration) {
                self.down = down
                self.up = up
            }
        }

        public var link: Link
        public var kind: Kind
        public var at: Duration
        public var duration: Duration
        /// Share of the link's devices it touches, drawn with the scenario's seed; always 1 on
        /// the links every device shares (`backend_push`, `fleet_backend`).
        public var share: Double
        public var flap: Flap?

        /// How long a window may last, and how late it may start.
        public static let longest: Duration = .seconds(86_400)

        public init(link: Link, kind: Kind, at: Duration, duration: Duration, share: Double = 1, flap: Flap? = nil) {
            self.link = link
            self.kind = kind
            self.at = at
            self.duration = duration
            self.share = share
            self.flap = flap
        }

        /// Whether the kernel's rules make this fault (loss, partition); else the run's proxy does.
        public var dropsPackets: Bool { !kind.isToxic }

        /// A short description for markers and reports: "partition both, 20% of phones".
        public var label: String {
            let what: String
            switch kind {
            case .loss(let ratio): what = "loss \(Self.percent(ratio))"
            case .partition(let direction): what = "partition " + String(direction.rawValue.map { $0 == "_" ? " " : $0 })
            case .latency(let delay, let jitter):
                what = "latency " + DurationText.format(delay) + (jitter > .zero ? " ± " + DurationText.format(jitter) : "")
            case .bandwidth(let rate): what = "bandwidth " + Self.rate(rate)
            case .slicer(let size, let delay): what = "slicer \(size) B every " + DurationText.format(delay)
            case .slowClose(let delay): what = "slow close " + DurationText.format(delay)
            case .timeout(let after): what = after > .zero ? "timeout " + DurationText.format(after) : "timeout (never closed)"
            case .resetPeer(let after): what = "reset peer after " + DurationText.format(after)
            }
            guard link == .phone else { return "\(link.rawValue) \(what)" }
            return "\(link.rawValue) \(what), \(Self.percent(share)) of devices"
        }

        static func rate(_ bytesPerSecond: Int) -> String {
            if bytesPerSecond >= 1_000_000 && bytesPerSecond % 1_000_000 == 0 { return "\(bytesPerSecond / 1_000_000)MB/s" }
            if bytesPerSecond >= 1000 && bytesPerSecond % 1000 == 0 { return "\(bytesPerSecond / 1000)KB/s" }
            return "\(bytesPerSecond)B/s"
        }

        static func percent(_ ratio: Double) -> String {
            let value = ratio * 100
            return value == value.rounded() ? "\(Int(value))%" : "\(value)%"
        }
    }
}
