import Foundation
public import PushFleetCore
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
    }

    enum AcceptOutcome: Equatable {
        case accepted(acceptedAt: Int64, online: Bool)
        /// The token is no longer valid; `since` is in milliseconds since the epoch.
        case unregistered(since: Int64)
        case throttled
    }

    private struct DeviceEntry {
        var connection: GatewayConnection?
        var pending: StoredPush?
        /// Set when the device unregistered through the gateway (ms since the epoch).
        var unregisteredAt: Int64?

        var isDisposable: Bool { connection == nil && pending == nil && unregisteredAt == nil }
    }

    private struct StoredPush {
        var frame: PushFrame
        var expiresAt: Int64
    }

    private final class Shard: Sendable {
        let devices = Mutex<[DeviceAddress: DeviceEntry]>([:])
    }

    public let configuration: Configuration
    let faults: FaultInjector
    let authority: ProviderAuthority
    private let shards: [Shard]
    private let counters = Mutex(PushServiceStats())
    private let nextConnectionID = Atomic<UInt64>(1)
    /// Pushes held now, across shards.
    private let held = Atomic<Int>(0)
    private let sweep = Mutex(ExpirySweep())
    private let now: @Sendable () -> Int64
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

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

    private func shard(for address: DeviceAddress) -> Shard {
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

    // MARK: Pushes

    /// Decides a push's fate: answered unregistered or throttled, or accepted and then delivered,
    /// held, dropped or delayed as the faults say.
    func accept(_ push: IncomingPush) -> AcceptOutcome {
        let decision = faults.decide(token: push.address.token)
        // One look at the device's entry answers both questions.
        let (unregisteredAt, connection) = shard(for: push.address).devices.withLock { devices in
            (devices[push.address]?.unregisteredAt, devices[push.address]?.connection)
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
                refused.type = PushFrame.refusedType
                refused.reason = "Unregistered"
                connection.send(encode(refused))
            }
            return .unregistered(since: unregisteredAt ?? now() / 1_000_000)
        }
        if decision.throttled {
            return .throttled
        }
        let acceptedAt = now()
        sweepIfDue(now: acceptedAt)
        counters.withLock {
            $0.accepted += 1
            if decision.dropped { $0.dropped += 1 }
        }
        if decision.dropped {
            return .accepted(acceptedAt: acceptedAt, online: online)
        }
        let frame = PushFrame(
            platform: push.address.platform,
            token: push.address.token,
            id: push.id,
            acceptedAt: acceptedAt,
            pushType: push.pushType,
            body: push.body,
            bodyEncoding: push.bodyEncoding
        )
        let expiresAt: Int64? =
            switch push.retention {
            case .defaultDuration: Saturating.add(acceptedAt, configuration.defaultStoreDuration.nanoseconds)
            case .until(let instant): instant
            case .doNotStore: nil
            }
        if decision.delay > .zero {
            Task {
                try? await Task.sleep(for: decision.delay)
                self.deliver(frame, expiresAt: expiresAt)
            }
        } else {
            deliver(frame, expiresAt: expiresAt)
        }
        return .accepted(acceptedAt: acceptedAt, online: online)
    }

    private func deliver(_ frame: PushFrame, expiresAt: Int64?) {
        let address = DeviceAddress(platform: frame.platform, token: frame.token)
        let text = encode(frame)
        shard(for: address).devices.withLock { devices in
            var entry = devices[address] ?? DeviceEntry()
            if let connection = entry.connection {
                connection.send(text)
                counters.withLock { $0.delivered += 1 }
            } else if let expiresAt {
                let replaced = entry.pending != nil
                guard replaced || reserveHold() else {
                    counters.withLock { $0.heldFull += 1 }
                    return
                }
                entry.pending = StoredPush(frame: frame, expiresAt: expiresAt)
                devices[address] = entry
                counters.withLock {
                    $0.stored += 1
                    if replaced { $0.storedReplaced += 1 }
                }
            } else {
                counters.withLock { $0.discardedOffline += 1 }
            }
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
        for shard in shards {
            shard.devices.withLock { devices in
                let expired = ExpirySweep.expired(in: devices, now: now) { $0.pending?.expiresAt }
                for address in expired {
                    devices[address]?.pending = nil
                    if devices[address]?.isDisposable == true { devices[address] = nil }
                }
                dropped += expired.count
            }
        }
        held.subtract(dropped, ordering: .relaxed)
        counters.withLock { $0.expired += dropped }
    }

    // MARK: Gateway

    func openConnection(mode: GatewayConnection.Mode) -> GatewayConnection {
        counters.withLock { $0.connections += 1 }
        return GatewayConnection(id: nextConnectionID.add(1, ordering: .relaxed).oldValue, mode: mode)
    }

    func closeConnection(_ connection: GatewayConnection) {
        detach(Array(connection.takeAll()), from: connection)
        connection.finish()
        counters.withLock { $0.connections -= 1 }
    }

    /// Takes the devices online on `connection`, sending each one's held push first.
    /// A device online elsewhere is taken over; its old connection is told (or closed).
    func attach(_ addresses: [DeviceAddress], to connection: GatewayConnection) {
        var displaced: [(GatewayConnection, DeviceAddress)] = []
        let instant = now()
        for address in addresses {
            shard(for: address).devices.withLock { devices in
                var entry = devices[address] ?? DeviceEntry()
                if let old = entry.connection, old !== connection {
                    displaced.append((old, address))
                }
                let wasOnline = entry.connection != nil
                entry.connection = connection
                entry.unregisteredAt = nil
                connection.insert(address)
                if let pending = entry.pending {
                    entry.pending = nil
                    held.subtract(1, ordering: .relaxed)
                    if pending.expiresAt > instant {
                        var frame = pending.frame
                        frame.stored = true
                        connection.send(encode(frame))
                        counters.withLock {
                            $0.delivered += 1
                            $0.storedDelivered += 1
                        }
                    } else {
                        counters.withLock { $0.expired += 1 }
                    }
                }
                devices[address] = entry
                if !wasOnline { counters.withLock { $0.online += 1 } }
            }
        }
        takeOffline(displaced, reason: "replaced")
    }

    /// Takes the devices offline if `connection` still holds them.
    func detach(_ addresses: [DeviceAddress], from connection: GatewayConnection) {
        for address in addresses {
            connection.remove(address)
            shard(for: address).devices.withLock { devices in
                guard var entry = devices[address], entry.connection === connection else { return }
                entry.connection = nil
                devices[address] = entry.isDisposable ? nil : entry
                counters.withLock { $0.online -= 1 }
            }
        }
    }

    /// Marks the tokens unregistered (the app was removed): later pushes are refused as
    /// Unregistered until the device subscribes again. Any held push is discarded.
    func unregister(_ addresses: [DeviceAddress]) {
        let since = now() / 1_000_000
        for address in addresses {
            shard(for: address).devices.withLock { devices in
                var entry = devices[address] ?? DeviceEntry()
                entry.unregisteredAt = since
                if entry.pending != nil { held.subtract(1, ordering: .relaxed) }
                entry.pending = nil
                devices[address] = entry
            }
        }
    }

    /// Takes online devices offline from the service side: each with probability `ratio`, and
    /// every one whose token is listed. Single-device connections are closed; multiplexed ones
    /// are told which of their devices went offline.
    public func forceDisconnect(_ request: DisconnectRequest) -> Int {
        let ratio = request.ratio ?? 0
        let tokens = Set(request.tokens ?? [])
        var taken: [(GatewayConnection, DeviceAddress)] = []
        for shard in shards {
            shard.devices.withLock { devices in
                for (address, entry) in devices {
                    guard let connection = entry.connection else { continue }
                    guard tokens.contains(address.token) || (ratio > 0 && faults.nextUnit() < ratio) else { continue }
                    var updated = entry
                    updated.connection = nil
                    devices[address] = updated.isDisposable ? nil : updated
                    taken.append((connection, address))
                }
            }
        }
        counters.withLock {
            $0.online -= taken.count
        }
        takeOffline(taken, reason: "forced")
        return taken.count
    }

    /// Tells connections that devices they held are offline now; closes single-device ones.
    private func takeOffline(_ pairs: [(GatewayConnection, DeviceAddress)], reason: String) {
        guard !pairs.isEmpty else { return }
        counters.withLock { $0.forcedDisconnects += pairs.count }
        var byConnection: [ObjectIdentifier: (GatewayConnection, [DeviceAddress])] = [:]
        for (connection, address) in pairs {
            connection.remove(address)
            byConnection[ObjectIdentifier(connection), default: (connection, [])].1.append(address)
        }
        for (connection, addresses) in byConnection.values {
            switch connection.mode {
            case .single:
                connection.close(reason: reason)
            case .multiplexed:
                connection.send(encode(GatewayNotice(type: .disconnected, devices: addresses, reason: reason)))
            }
        }
    }

    func encode(_ value: some Encodable) -> String {
        // JSONEncoder is thread-safe for encoding; sharing one avoids an allocation per frame.
        (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? "{}"
    }
}
