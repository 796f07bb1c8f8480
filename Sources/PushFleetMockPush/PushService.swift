import Foundation
public import PushFleetCore
import PushFleetServerSupport
import PushFleetWebPush
public import PushFleetWire
import Synchronization

/// The state of the mock push service: which devices are online on which gateway connection,
/// the push held for each offline device, the faults in force and the counters.
///
/// The HTTP front ends (APNs, FCM, WNS) validate the provider request in their platform's terms
/// and hand a well-formed push to ``accept(_:)``; the gateway attaches and detaches devices.
/// State is sharded by device so that pushes to different devices rarely share a lock.
public final class PushService: Sendable {
    public struct Configuration: Sendable {
        public var faults: FaultSettings
        /// How long a push that names no expiration is held for an offline device.
        public var defaultStoreDuration: Duration
        /// Pushes held for offline devices at most (one per device). Providers choose the tokens,
        /// so without a bound every new token would keep its push in memory for good; past it, a
        /// push for an offline device is not held (`heldFull`).
        public var maxHeldPushes: Int
        /// Which senders' credentials the provider endpoints accept.
        public var providerAuth: ProviderAuthConfiguration

        public init(
            faults: FaultSettings = .init(),
            defaultStoreDuration: Duration = .seconds(30 * 86_400),
            maxHeldPushes: Int = 250_000,
            providerAuth: ProviderAuthConfiguration = .init()
        ) {
            self.faults = faults
            self.defaultStoreDuration = defaultStoreDuration
            self.maxHeldPushes = maxHeldPushes
            self.providerAuth = providerAuth
        }
    }

    /// How long the push may wait for an offline device.
    enum Retention: Sendable {
        /// Hold it for the service's default duration.
        case defaultDuration
        /// Hold it until this wall-clock instant (ns since the epoch).
        case until(Int64)
        /// Deliver only to an online device; never hold it.
        case doNotStore
    }

    struct IncomingPush: Sendable {
        var address: DeviceAddress
        var id: String
        var pushType: String
        var body: String
        var bodyEncoding: String?
        var retention: Retention
        /// The service's number for it (``nextPush()``), in every report of it and in its frame.
        var push: UInt64 = 0
        /// When the notification hub that sent it took the send, if one did.
        var hubAt: Int64? = nil
        /// A Web Push message's headers, for the browser.
        var webPush: WebPushHeaders? = nil
        /// The W3C `traceparent` the provider request carried (``ProviderRequest/traceparent``).
        var trace: String? = nil
        /// FCM: a collapsible message's key (``PushFrame/collapseKey``).
        var collapseKey: String? = nil
    }

    enum AcceptOutcome: Equatable {
        case accepted(acceptedAt: Int64, online: Bool)
        /// The token is no longer valid; `since` is in milliseconds since the epoch.
        case unregistered(since: Int64)
        case throttled
    }

    struct DeviceEntry {
        var connection: GatewayConnection?
        var pending: StoredPush?
        /// Set when the device unregistered through the gateway (ms since the epoch).
        var unregisteredAt: Int64?
        /// A browser's Web Push subscription, kept from its minting until the service stops.
        var webPush: BrowserSubscription?
        /// Web Push and FCM: messages held after `pending`, oldest first. RFC 8030 holds every
        /// message until its TTL (a Topic replaces the one with the same topic), FCM up to 100;
        /// APNs and WNS hold one.
        var queued: [StoredPush] = []
        /// When the device's own connection (`/device`) ended and took it offline (ns since the
        /// epoch), until it connects again: its next `subscribed` says so.
        var offlineSince: Int64?

        var isDisposable: Bool {
            connection == nil && pending == nil && unregisteredAt == nil && webPush == nil && queued.isEmpty && offlineSince == nil
        }
    }

    struct StoredPush {
        var frame: PushFrame
        var expiresAt: Int64
    }

    final class Shard: Sendable {
        let devices = Mutex<[DeviceAddress: DeviceEntry]>([:])
    }

    public let configuration: Configuration
    let faults: FaultInjector
    let authority: ProviderAuthority
    let shards: [Shard]
    let counters = Mutex(PushServiceStats())
    let nextConnectionID = Atomic<UInt64>(1)
    /// Pushes held now, across shards.
    let held = Atomic<Int>(0)
    private let sweep = Mutex(ExpirySweep())
    let now: @Sendable () -> Int64
    /// The runs watching what becomes of their pushes.
    let watchers = PushWatchers()
    /// Web Push senders' VAPID headers, checked once each.
    let vapid = VAPIDVerifier()
    /// The TLS listener's port once bound (0: none), for Web Push endpoints in public form.
    let tlsPort = Atomic<Int>(0)
    private let nextPushNumber = Atomic<UInt64>(1)

    /// - Parameters:
    ///   - configuration: faults at start and retention defaults.
    ///   - now: wall clock in nanoseconds since the epoch; tests pass a manual one.
    public init(configuration: Configuration = .init(), now: @escaping @Sendable () -> Int64 = WallClock.nanoseconds) {
        self.configuration = configuration
        self.faults = FaultInjector(settings: configuration.faults)
        self.authority = ProviderAuthority(configuration: configuration.providerAuth, now: { now() / 1_000_000_000 })
        self.shards = (0..<64).map { _ in Shard() }
        self.now = now
    }

    func shard(for address: DeviceAddress) -> Shard {
        shards[Int(UInt(bitPattern: address.token.hashValue) % UInt(shards.count))]
    }

    // MARK: Faults and counters

    public var faultSettings: FaultSettings { faults.settings }

    public func replaceFaults(with settings: FaultSettings) {
        faults.replace(with: settings)
    }

    public func stats() -> PushServiceStats {
        var stats = counters.withLock { $0 }
        stats.held = held.load(ordering: .relaxed)
        return stats
    }

    func recordRejection(_ reason: String) {
        counters.withLock { $0.rejected[reason, default: 0] += 1 }
    }

    /// A number for the next push a provider hands over, unique while the service runs.
    func nextPush() -> UInt64 {
        nextPushNumber.add(1, ordering: .relaxed).oldValue
    }

    /// Reports a step of a push (after its first report) to the runs watching.
    func report(_ step: PushHop.Step, of frame: PushFrame, at instant: Int64, delay: Int64? = nil) {
        guard let push = frame.push else { return }
        watchers.report(PushHop(push: push, step: step, at: instant, platform: frame.platform.rawValue, token: frame.token, delay: delay))
    }

    // MARK: Pushes

    /// Decides a push's fate: answered unregistered or throttled, or accepted and then delivered,
    /// held, dropped or delayed as the faults say.
    func accept(_ push: IncomingPush) -> AcceptOutcome {
        // One reading of the clock: the faults' decision is made at the instant of acceptance.
        let acceptedAt = now()
        let decision = faults.decide(token: push.address.token, at: acceptedAt)
        // One look at the device's entry answers both questions.
        let (unregisteredAt, connection) = shard(for: push.address).devices.withLock { devices in
            let entry = devices[push.address]
            return (entry?.unregisteredAt, entry?.connection)
        }
        let online = connection != nil
        if decision.unregistered || unregisteredAt != nil {
            // The device is told of every push refused for its token, so a test can check that
            // the backend stopped sending once told (the refusal is not a delivery).
            if let connection {
                var refused = PushFrame(
                    platform: push.address.platform, token: push.address.token, id: push.id, acceptedAt: now(), pushType: push.pushType,
                    body: push.body, bodyEncoding: push.bodyEncoding
                )
                refused.push = push.push
                refused.webPush = push.webPush
                refused.type = PushFrame.refusedType
                refused.reason = "Unregistered"
                connection.send(refused.encodedJSON)
            }
            return .unregistered(since: unregisteredAt ?? now() / 1_000_000)
        }
        if decision.throttled {
            return .throttled
        }
        sweepIfDue(now: acceptedAt)
        counters.withLock {
            $0.accepted += 1
            if decision.dropped { $0.dropped += 1 }
        }
        var frame = PushFrame(
            platform: push.address.platform,
            token: push.address.token,
            id: push.id,
            acceptedAt: acceptedAt,
            pushType: push.pushType,
            body: push.body,
            bodyEncoding: push.bodyEncoding
        )
        frame.push = push.push
        frame.hubAt = push.hubAt
        frame.webPush = push.webPush
        frame.trace = push.trace
        frame.collapseKey = push.collapseKey
        watchers.report(
            PushHop(
                push: push.push, step: .accepted, at: acceptedAt, platform: push.address.platform.rawValue, token: push.address.token,
                pushType: push.pushType, body: push.body, base64: push.bodyEncoding == "base64" ? true : nil, hubAt: push.hubAt, trace: push.trace
            )
        )
        if decision.dropped {
            report(.dropped, of: frame, at: acceptedAt)
            return .accepted(acceptedAt: acceptedAt, online: online)
        }
        let expiresAt: Int64? =
            switch push.retention {
            case .defaultDuration: Saturating.add(acceptedAt, configuration.defaultStoreDuration.nanoseconds)
            case .until(let instant): instant
            case .doNotStore: nil
            }
        // The service rate's wait and a fault's delay add up.
        let delay = decision.delay + .nanoseconds(decision.served)
        if delay > .zero {
            frame.delay = delay.nanoseconds
            report(.delayed, of: frame, at: acceptedAt, delay: frame.delay)
            Task {
                try? await Task.sleep(for: delay)
                self.deliver(frame, expiresAt: expiresAt)
            }
        } else {
            deliver(frame, expiresAt: expiresAt)
        }
        return .accepted(acceptedAt: acceptedAt, online: online)
    }

    /// A push its device never acknowledged, back from a connection that ended: delivered anew,
    /// so held by the platform's rules when the device is offline.
    func requeue(_ frame: PushFrame, expiresAt: Int64?) {
        var frame = frame
        frame.writtenAt = nil
        deliver(frame, expiresAt: expiresAt)
    }

    private func deliver(_ frame: PushFrame, expiresAt: Int64?) {
        let address = DeviceAddress(platform: frame.platform, token: frame.token)
        // Reports are made after the lock: a watcher in this process records them at once.
        let watched = watchers.isActive
        var fates: [(PushHop.Step, PushFrame)] = []
        shard(for: address).devices.withLock { devices in
            var entry = devices[address] ?? DeviceEntry()
            if let connection = entry.connection {
                connection.send(frame, tracked: watched, expiresAt: expiresAt)
                counters.withLock { $0.delivered += 1 }
            } else if let expiresAt, frame.platform == .webpush, let first = entry.pending {
                holdBeside(first, StoredPush(frame: frame, expiresAt: expiresAt), in: &entry, fates: &fates, watched: watched)
                devices[address] = entry
            } else if let expiresAt, Self.holdKey(frame) != nil, entry.pending != nil {
                holdCollapsible(StoredPush(frame: frame, expiresAt: expiresAt), in: &entry, fates: &fates, watched: watched)
                devices[address] = entry
            } else if let expiresAt, frame.platform == .fcm, entry.pending != nil {
                holdQueued(StoredPush(frame: frame, expiresAt: expiresAt), in: &entry, fates: &fates, watched: watched)
                devices[address] = entry
            } else if let expiresAt {
                let replaced = entry.pending
                guard replaced != nil || reserveHold() else {
                    counters.withLock { $0.heldFull += 1 }
                    if watched { fates.append((.holdFull, frame)) }
                    return
                }
                entry.pending = StoredPush(frame: frame, expiresAt: expiresAt)
                devices[address] = entry
                counters.withLock {
                    $0.stored += 1
                    if replaced != nil { $0.storedReplaced += 1 }
                }
                if watched {
                    if let replaced { fates.append((.replaced, replaced.frame)) }
                    fates.append((.held, frame))
                }
            } else {
                counters.withLock { $0.discardedOffline += 1 }
                if watched { fates.append((.notStored, frame)) }
            }
        }
        guard !fates.isEmpty else { return }
        let instant = now()
        for (step, frame) in fates { report(step, of: frame, at: instant) }
    }

    /// Most messages held for one Web Push subscription (FCM's limit); past it the oldest gives way.
    static let webPushHoldLimit = 100

    /// Holds a Web Push message for a browser that already has `first` held (RFC 8030 §5.4).
    private func holdBeside(_ first: StoredPush, _ message: StoredPush, in entry: inout DeviceEntry, fates: inout [(PushHop.Step, PushFrame)], watched: Bool) {
        var replaced: StoredPush?
        if let topic = message.frame.webPush?.topic, first.frame.webPush?.topic == topic {
            replaced = first
            entry.pending = message
        } else if let topic = message.frame.webPush?.topic, let index = entry.queued.firstIndex(where: { $0.frame.webPush?.topic == topic }) {
            replaced = entry.queued[index]
            entry.queued[index] = message
        } else if entry.queued.count + 1 >= Self.webPushHoldLimit {
            replaced = first
            entry.pending = entry.queued.removeFirst()
            entry.queued.append(message)
        } else {
            guard reserveHold() else {
                counters.withLock { $0.heldFull += 1 }
                if watched { fates.append((.holdFull, message.frame)) }
                return
            }
            entry.queued.append(message)
        }
        recordHeld(message, replacing: replaced, fates: &fates, watched: watched)
    }

    /// Most messages FCM holds for an offline device; past it FCM discards them all and tells the
    /// app (`onDeletedMessages`).
    static let fcmHoldLimit = 100

    /// Holds an FCM message for a device that already has one held: every one is kept, in order,
    /// up to ``fcmHoldLimit``; the one past it discards the whole hold and is held alone.
    private func holdQueued(_ message: StoredPush, in entry: inout DeviceEntry, fates: inout [(PushHop.Step, PushFrame)], watched: Bool) {
        if entry.queued.count + 1 >= Self.fcmHoldLimit, let first = entry.pending {
            let discarded = [first] + entry.queued
            held.subtract(discarded.count, ordering: .relaxed)
            entry.pending = nil
            entry.queued = []
            counters.withLock { $0.discardedHeld += discarded.count }
            if watched { fates.append(contentsOf: discarded.map { (.discarded, $0.frame) }) }
        }
        guard reserveHold() else {
            counters.withLock { $0.heldFull += 1 }
            if watched { fates.append((.holdFull, message.frame)) }
            return
        }
        if entry.pending == nil { entry.pending = message } else { entry.queued.append(message) }
        counters.withLock { $0.stored += 1 }
        if watched { fates.append((.held, message.frame)) }
    }

    /// Most collapse keys FCM holds messages of for one device at a time.
    static let fcmCollapseKeys = 4

    /// What a held push replaces the held one of: FCM's collapse key; a WNS notification's type
    /// (WNS caches one badge, one tile, one toast and, when asked, one raw notification per
    /// channel). Nil for a push held beside the others (FCM's non-collapsible messages).
    static func holdKey(_ frame: PushFrame) -> String? {
        switch frame.platform {
        case .fcm: frame.collapseKey
        case .wns: frame.pushType
        default: nil
        }
    }

    /// Holds a push with a ``holdKey(_:)`` for a device that already has one held: it replaces
    /// the one held with its key, in its place; for FCM a fifth key gives the oldest key's
    /// message up (FCM keeps four keys, and says not which).
    private func holdCollapsible(_ message: StoredPush, in entry: inout DeviceEntry, fates: inout [(PushHop.Step, PushFrame)], watched: Bool) {
        let key = Self.holdKey(message.frame)
        var replaced: StoredPush?
        if entry.pending.map({ Self.holdKey($0.frame) == key }) == true {
            replaced = entry.pending
            entry.pending = message
        } else if let index = entry.queued.firstIndex(where: { Self.holdKey($0.frame) == key }) {
            replaced = entry.queued[index]
            entry.queued[index] = message
        } else {
            let held = [entry.pending].compactMap(\.self) + entry.queued
            if message.frame.platform == .fcm, Set(held.compactMap { Self.holdKey($0.frame) }).count >= Self.fcmCollapseKeys {
                // The oldest collapsible message makes room; the new one takes its place in the hold.
                if entry.pending.map({ Self.holdKey($0.frame) != nil }) == true {
                    replaced = entry.pending
                    entry.pending = entry.queued.isEmpty ? nil : entry.queued.removeFirst()
                } else if let index = entry.queued.firstIndex(where: { Self.holdKey($0.frame) != nil }) {
                    replaced = entry.queued.remove(at: index)
                }
                if entry.pending == nil { entry.pending = message } else { entry.queued.append(message) }
            } else {
                holdQueued(message, in: &entry, fates: &fates, watched: watched)
                return
            }
        }
        recordHeld(message, replacing: replaced, fates: &fates, watched: watched)
    }

    /// Counts a push held, and the one it replaced if any, and reports both to a watcher.
    private func recordHeld(_ message: StoredPush, replacing replaced: StoredPush?, fates: inout [(PushHop.Step, PushFrame)], watched: Bool) {
        counters.withLock {
            $0.stored += 1
            if replaced != nil { $0.storedReplaced += 1 }
        }
        if watched {
            if let replaced { fates.append((.replaced, replaced.frame)) }
            fates.append((.held, message.frame))
        }
    }

    /// Takes a place in the hold if there is one.
    private func reserveHold() -> Bool {
        if held.add(1, ordering: .relaxed).newValue <= configuration.maxHeldPushes { return true }
        held.subtract(1, ordering: .relaxed)
        return false
    }

    /// Drops held pushes that expired, from the push path: offline devices that never come back
    /// would otherwise keep theirs until the service stops. Every 30 s, or every second while the
    /// hold is full, so that expired pushes make room for new ones.
    private func sweepIfDue(now: Int64) {
        let interval: Int64 = held.load(ordering: .relaxed) >= configuration.maxHeldPushes ? 1_000_000_000 : 30_000_000_000
        guard sweep.withLock({ $0.isDue(now: now, interval: interval) }) else { return }
        sweepExpired(now: now)
    }

    /// Drops every held push that expired by `now`.
    private func sweepExpired(now: Int64) {
        var dropped = 0
        var frames: [PushFrame] = []
        let watched = watchers.isActive
        for shard in shards {
            shard.devices.withLock { devices in
                let expired = ExpirySweep.expired(in: devices, now: now) { entry in
                    guard let queued = entry.queued.lazy.map(\.expiresAt).min() else { return entry.pending?.expiresAt }
                    return min(entry.pending?.expiresAt ?? queued, queued)
                }
                for address in expired {
                    guard var entry = devices[address] else { continue }
                    if let pending = entry.pending, pending.expiresAt <= now {
                        if watched { frames.append(pending.frame) }
                        entry.pending = nil
                        dropped += 1
                    }
                    entry.queued.removeAll { message in
                        guard message.expiresAt <= now else { return false }
                        if watched { frames.append(message.frame) }
                        dropped += 1
                        return true
                    }
                    if entry.pending == nil, !entry.queued.isEmpty { entry.pending = entry.queued.removeFirst() }
                    devices[address] = entry.isDisposable ? nil : entry
                }
            }
        }
        for frame in frames { report(.expired, of: frame, at: now) }
        held.subtract(dropped, ordering: .relaxed)
        counters.withLock { $0.expired += dropped }
    }
}
