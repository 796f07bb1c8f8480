import Foundation

/// One step in the life of a push a backend handed to pushfleet's push service, as the service
/// reports it to a run that watches it (in process, or over the push port's `/observe`
/// WebSocket). A push's first report is `refused` or `accepted` and carries what the push was
/// (platform, token, type, body, the hub it came through); later ones carry only its number, the
/// step and its time. A run keeps the reports of its own tokens and nonces (see
/// ``DeliveryLedger/PushTrail``) and explains every lost or late pair by them.
public struct PushHop: Codable, Sendable, Equatable {
    public enum Step: String, Codable, Sendable, CaseIterable {
        /// Refused at the provider API, with the status and reason the backend was answered.
        case refused
        /// Accepted for delivery.
        case accepted
        /// Held back for ``PushHop/delay`` nanoseconds by an injected latency fault.
        case delayed
        /// Held for its offline device (one push per device, until it expires).
        case held
        /// Written to the device's gateway socket.
        case written
        /// Dropped by an injected drop fault.
        case dropped
        /// Held, and expired before its device came back.
        case expired
        /// Held, and replaced by a newer push for the same device (one is kept per device).
        case replaced
        /// Its device was offline and the hold for offline devices was full.
        case holdFull = "hold_full"
        /// Its device was offline and the push asked not to be stored (expiration or TTL 0).
        case notStored = "not_stored"
        /// Held, and discarded because its device's token was unregistered.
        case unregistered
        /// Handed to its device's connection, which closed before the push went out.
        case disconnected
        /// Held, and discarded with everything held for its device: more than FCM keeps (100),
        /// which FCM tells the app (`onDeletedMessages`).
        case discarded

        /// The push's first report: it says what the push was.
        public var isFirst: Bool { self == .refused || self == .accepted }
        /// Nothing follows: the push will never reach its device.
        public var isFinal: Bool {
            switch self {
            case .refused, .dropped, .expired, .replaced, .holdFull, .notStored, .unregistered, .disconnected, .discarded: true
            case .accepted, .delayed, .held, .written: false
            }
        }
    }

    /// The push service's number for the push, unique while the service runs.
    public var push: UInt64
    public var step: Step
    /// When, in wall-clock nanoseconds since the Unix epoch (the push service's clock); a run
    /// moves it onto its own clock when it records the report.
    public var at: Int64
    /// `apns`, `fcm`, `wns`.
    public var platform: String
    /// The device token the push was addressed to (a WNS channel's id).
    public var token: String
    /// First report only: `alert`/`background`, `data`, `wns/toast`…
    public var pushType: String?
    /// First report only: the provider's request body, as the backend sent it (base64 when
    /// ``base64`` is true: a binary WNS raw push).
    public var body: String?
    public var base64: Bool?
    /// First report only, for a push a notification hub sent: when the hub took the send.
    public var hubAt: Int64?
    /// `refused` only: the status and reason the backend was answered (`403`, `InvalidProviderToken`).
    public var status: Int?
    public var reason: String?
    /// `delayed` only: how long, in nanoseconds.
    public var delay: Int64?
    /// A first report merged with a later step of the same push before it was sent (`/observe`
    /// sends a push accepted and written in one batch as one report): the step is the later
    /// one, `at` still the first report's time, and this the later step's time.
    public var then: Int64?
    /// First report only: the W3C `traceparent` the provider request carried (the backend's
    /// context for the push), when it carried a well-formed one.
    public var trace: String?

    /// Inlinable, as the push frame's init is: several are made for every push watched, in
    /// another module.
    @inlinable
    public init(
        push: UInt64, step: Step, at: Int64, platform: String, token: String, pushType: String? = nil, body: String? = nil, base64: Bool? = nil,
        hubAt: Int64? = nil, status: Int? = nil, reason: String? = nil, delay: Int64? = nil, then: Int64? = nil, trace: String? = nil
    ) {
        self.then = then
        self.trace = trace
        self.push = push
        self.step = step
        self.at = at
        self.platform = platform
        self.token = token
        self.pushType = pushType
        self.body = body
        self.base64 = base64
        self.hubAt = hubAt
        self.status = status
        self.reason = reason
        self.delay = delay
    }

    private enum CodingKeys: String, CodingKey {
        case push, step, at, platform, token, body, base64, status, reason, delay, then, trace
        case pushType = "push_type"
        case hubAt = "hub_at"
    }

    /// Whether a report belongs to the run with this id: its token carries the run id (every
    /// token of a run does), or its body carries one of the run's nonces.
    public func belongs(toRun run: String) -> Bool {
        guard !run.isEmpty else { return false }
        if Self.bytes(of: token, contain: run) { return true }
        guard let body else { return false }
        return Self.bytes(of: body, contain: "pf:" + run + ":")
    }

    /// Whether `needle`'s UTF-8 bytes occur in `haystack`'s. Run ids and nonces are ASCII, so
    /// bytes are what to match (`String.contains` compares characters, slower, and a combining
    /// mark after an id would hide it); the push service asks once per push and watcher, and the
    /// generic search was ~2% of `serve`'s CPU per secure push.
    static func bytes(of haystack: String, contain needle: String) -> Bool {
        var haystack = haystack
        var needle = needle
        return haystack.withUTF8 { hay in
            needle.withUTF8 { pin in
                guard let first = pin.first, pin.count <= hay.count else { return pin.isEmpty }
                var start = 0
                let last = hay.count - pin.count
                while start <= last {
                    if hay[start] == first, memcmp(hay.baseAddress! + start, pin.baseAddress!, pin.count) == 0 { return true }
                    start += 1
                }
                return false
            }
        }
    }
}

/// A notification hub took a send: what it was asked to deliver, for a run that watches the hub
/// (a pair lost behind a hub is then told apart: the hub never had the send, or had it and
/// pushed nothing to the device).
public struct HubNote: Codable, Sendable, Equatable {
    /// When the hub took the send (wall clock, as ``PushHop/at``).
    public var at: Int64
    /// The notification's body as the backend sent it to the hub.
    public var body: String
    /// `apple`, `fcmv1`, `gcm`, `windows`, or `template`.
    public var format: String
    /// Pushes it made (registrations the send selected).
    public var targets: Int

    public init(at: Int64, body: String, format: String, targets: Int) {
        self.at = at
        self.body = body
        self.format = format
        self.targets = targets
    }
}

/// What a push service reports to a run watching it: a batch of hops, hub notes, and how many
/// reports it had to leave out because the run did not read them fast enough.
public struct PushReport: Codable, Sendable, Equatable {
    public var hops: [PushHop]
    public var hub: [HubNote]?
    /// Reports left out before this batch (the run's view has a gap here).
    public var lost: Int?

    public init(hops: [PushHop] = [], hub: [HubNote]? = nil, lost: Int? = nil) {
        self.hops = hops
        self.hub = hub
        self.lost = lost
    }
}

/// A push service a run can watch in process (pushfleet's own, when the run started it).
public protocol PushServiceWatching: Sendable {
    /// Reports, to `sink`, what becomes of every push of the run `run` (its tokens and nonces)
    /// from now until the returned watch is cancelled. `sink` is called on the push service's
    /// threads and must not block.
    func watch(run: String, _ sink: @escaping @Sendable (PushReport) -> Void) -> any PushServiceWatch
}

/// A watch in force; cancelling it stops the reports.
public protocol PushServiceWatch: Sendable {
    func cancel()
}
