public import PushFleetCore

/// The delivery ledger: what was sent to whom, what each device received or had refused, and —
/// at the end — one outcome for every (send, device) pair and every push.
///
/// Terms:
/// - A device is *eligible* while its registration is confirmed (the backend answered the PUT)
///   and not withdrawn, and the push service has not declared its token dead. Each change is
///   recorded with the span of the request that made it (request start to answer): the backend
///   may apply it anywhere in that span.
/// - The *expected recipients* of a send are the target user's devices on the targeted
///   platforms that were eligible when the send started and did not change until its answer.
///   Devices that changed inside that window are *indeterminate*: counted, judged neither way.
/// - Each (send, expected device) ends *delivered* (first receipt within the deadline of the
///   send's start), *late* (after it), *unverified* (received, but its content could not be
///   fetched), *unregistered* (refused by the push service as a dead token) or *lost* (none of
///   these). A further receipt of the same pair is a *duplicate*.
/// - A receipt by any device not expected is *misdelivered*, as is a push that names nothing
///   of this run's sends meant for the device. A push that names a send of another run, or
///   arrives before its send started, is *stale*: never credited.
/// - A push the push service refused because the token is dead is *unregistered* when the
///   backend could not yet know, and *sent to a dead token* when its send started after the
///   backend had its answer for the first refused push to that token.
/// - A *leak* is any successful read of a notification by someone other than its recipient.
///
/// Times are nanoseconds on one monotonic clock.
public struct DeliveryLedger: Sendable {
    public struct Device: Sendable {
        public var user: Int
        public var platform: Scenario.PlatformName
        /// Its push token as the push service knows it (a WNS channel's id), when the push
        /// service's reports are to be matched to devices.
        public var token: String?

        public init(user: Int, platform: Scenario.PlatformName, token: String? = nil) {
            self.user = user
            self.platform = platform
            self.token = token
        }
    }

    public struct Send: Sendable {
        public var id: Int
        public var from: Int
        public var to: Int
        public var kind: Scenario.Traffic.Kind
        /// The targeted platforms, kept as a set of flags: a ledger holds every send of a run.
        public var platforms: [Scenario.PlatformName] {
            get { PlatformSet.members(platformSet) }
            set { platformSet = PlatformSet.flags(newValue) }
        }
        private var platformSet: UInt8
        /// When the schedule wanted it to start.
        public var intended: Int64
        public var start: Int64
        public var end: Int64
        /// The backend accepted it (2xx).
        public var succeeded: Bool
        /// The backend answered at all (false: timeout, connection failure).
        public var answered: Bool = true
        /// The id the backend gave the stored content in its answer, when it gave one.
        public var contentID: String? {
            get { storedContentID?.text }
            set { storedContentID = .init(newValue) }
        }
        private var storedContentID: CompactText?

        public init(
            id: Int, from: Int, to: Int, kind: Scenario.Traffic.Kind, platforms: [Scenario.PlatformName],
            intended: Int64, start: Int64, end: Int64, succeeded: Bool, contentID: String? = nil
        ) {
            self.id = id
            self.from = from
            self.to = to
            self.kind = kind
            self.platformSet = PlatformSet.flags(platforms)
            self.intended = intended
            self.start = start
            self.end = end
            self.succeeded = succeeded
            self.storedContentID = .init(contentID)
        }

        /// Whether the send targets `platform`, without building the list.
        public func targets(_ platform: Scenario.PlatformName) -> Bool {
            platformSet & PlatformSet.flag(platform) != 0
        }
    }

    /// What a push names, as far as the device could tell.
    public enum Attribution: Sendable, Equatable {
        /// A send of this run (by its nonce, or by fetched content carrying it).
        case send(Int)
        /// A send of another run (its nonce carries another run id).
        case otherRun
        /// Only stored content, by id; the ledger knows its send if the backend's answer or
        /// another device's fetch named it.
        case content(String)
        /// Nothing of this run: no nonce, or content that is not any send's.
        case unattributable
        /// A Web Push payload the browser could not decrypt: whatever it carried is unreadable.
        case undecryptable
    }

    /// What became of the content a secure or rich push names.
    public enum ContentCheck: Sendable, Equatable {
        /// A plain push: the content is the push.
        case none
        /// Fetched: the content was in hand at this instant.
        case fetched(at: Int64)
        /// The fetch failed, timed out or was refused; `reason` is a bounded label.
        case failed(reason: String)
    }

    public struct Receipt: Sendable {
        public var device: Int
        public var attribution: Attribution
        /// When the push arrived at the device.
        public var time: Int64
        public var content: ContentCheck
        /// The stored content's id the push named, when it was fetched (teaches the ledger
        /// which send an id belongs to).
        public var contentID: String? {
            get { storedContentID?.text }
            set { storedContentID = .init(newValue) }
        }
        private var storedContentID: CompactText?
        /// Where the push went on its way, when the push service said.
        public var path: PushPath?

        public init(
            device: Int, attribution: Attribution, time: Int64, content: ContentCheck = .none, contentID: String? = nil, path: PushPath? = nil
        ) {
            self.device = device
            self.attribution = attribution
            self.time = time
            self.content = content
            self.storedContentID = .init(contentID)
            self.path = path
        }

        /// When the content was in hand (after a secure or rich fetch that succeeded).
        public var contentTime: Int64? {
            switch content {
            case .fetched(let at): at
            case .none, .failed: nil
            }
        }
    }

    /// A push the push service refused because the device's token is dead, as the service
    /// reported it to the device.
    public struct Rejection: Sendable {
        public var device: Int
        public var attribution: Attribution
        /// When the push service refused it.
        public var time: Int64
        /// The push service's number for the push, when it gave one.
        public var push: UInt64?

        public init(device: Int, refused attribution: Attribution, at time: Int64, push: UInt64? = nil) {
            self.device = device
            self.attribution = attribution
            self.time = time
            self.push = push
        }
    }

    /// A leak probe's successful read of a notification that was not the prober's.
    public struct ProbeLeak: Sendable {
        public var device: Int
        public var time: Int64
        /// What was read, for the incident row.
        public var detail: String

        public init(device: Int, time: Int64, detail: String) {
            self.device = device
            self.time = time
            self.detail = detail
        }
    }

    struct Transition: Sendable {
        var start: Int64
        var time: Int64
        var eligible: Bool
    }

    public internal(set) var devices: [Device] = []
    public internal(set) var devicesOfUser: [[Int]]
    var transitions: [[Transition]] = []
    public internal(set) var sends = SendTable()
    public internal(set) var receipts: [Receipt] = []
    public internal(set) var rejections: [Rejection] = []
    public private(set) var probeLeaks: [ProbeLeak] = []
    var awaiting = Awaited()
    /// What the push service reported of the run's pushes (``PushTrail``).
    public internal(set) var trail = PushTrail()
    /// A push that arrives this long after its send's answer is never credited (nil: no bound).
    /// Sends settled for good are judged and let go once it has passed (``fold(now:deadline:incidentLimit:)``).
    public var horizon: Duration?
    /// What folding judged and let go of.
    var folds = Folds()

    public init(users: Int) {
        devicesOfUser = Array(repeating: [], count: users)
    }

    /// A ledger whose sends are numbered offset+1, offset+1+stride, … (a shard's), so it keeps
    /// them in place by number (``SendTable``).
    public init(users: Int, sendStride stride: Int, offset: Int) {
        self.init(users: users)
        sends = .spaced(stride: stride, offset: offset)
    }

    public mutating func addDevice(_ device: Device) -> Int {
        devices.append(device)
        transitions.append([])
        devicesOfUser[device.user].append(devices.count - 1)
        return devices.count - 1
    }

    /// Records a change of eligibility made by a request that started at `start` (default: the
    /// same instant) and was answered at `time`, from which the new state holds. Changes may
    /// arrive out of order; the verdict orders them.
    public mutating func setEligible(_ device: Int, _ eligible: Bool, at time: Int64, since start: Int64? = nil) {
        transitions[device].append(Transition(start: start ?? time, time: time, eligible: eligible))
        recheckAwaited(device)
    }

    public mutating func record(_ send: Send) {
        sends[send.id] = send
        awaitSend(send)
    }

    /// Records a receipt; `push` is the push service's number for the push, when it gave one.
    public mutating func record(_ receipt: Receipt, push: UInt64? = nil) {
        receipts.append(receipt)
        pushArrived(push)
        if receipt.path?.viaHub == true { trail.viaHub = true }
        learnOwner(from: receipt)
        settle(receipt.attribution, device: receipt.device, at: receipt.time)
    }

    /// Records a refused push; the first one for a token ends the device's eligibility then.
    public mutating func record(_ rejection: Rejection) {
        rejections.append(rejection)
        pushArrived(rejection.push)
        settle(rejection.attribution, device: rejection.device, at: rejection.time)
        setEligible(rejection.device, false, at: rejection.time)
    }

    public mutating func record(_ leak: ProbeLeak) {
        probeLeaks.append(leak)
    }
}
