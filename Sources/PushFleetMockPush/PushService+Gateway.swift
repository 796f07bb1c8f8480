import PushFleetCore
public import PushFleetWire
import Synchronization

/// The device gateway's side of the push service: connections opening and closing, devices
/// coming online (their held push first) and going offline, tokens unregistered, and devices
/// taken offline by the service.
extension PushService {
    func openConnection(mode: GatewayConnection.Mode, acks: Bool = false, writer: GatewayConnection.Writer? = nil) -> GatewayConnection {
        counters.withLock { $0.connections += 1 }
        return GatewayConnection(id: nextConnectionID.add(1, ordering: .relaxed).oldValue, mode: mode, acks: acks, writer: writer)
    }

    func closeConnection(_ connection: GatewayConnection) {
        let instant = now()
        let closed: Int64? = if case .single = connection.mode { instant } else { nil }
        detach(connection.takeAll(), from: connection, closedAt: closed)
        connection.finish()
        for frame in connection.takeUnsent() { report(.disconnected, of: frame, at: instant) }
        // What the device never acknowledged is the service's again: held as any push for an
        // offline device (the platform's rules: APNs keeps the newest only), or sent on the
        // device's new connection if it has one already.
        let unacknowledged = connection.takeUnacknowledged()
        if !unacknowledged.isEmpty {
            counters.withLock { $0.requeued += unacknowledged.count }
            for (frame, expiresAt) in unacknowledged { requeue(frame, expiresAt: expiresAt) }
        }
        counters.withLock { $0.connections -= 1 }
    }

    /// What a device's previous connection came to, as its next `subscribed` tells it.
    struct Previous: Sendable, Equatable {
        /// When its own connection ended (ns since the epoch).
        var offlineSince: Int64?
        /// It was still open: this connection took it over.
        var tookOver = false
    }

    /// Takes the devices online on `connection`, sending each one's held push first.
    /// A device online elsewhere is taken over; its old connection is told (or closed).
    /// Returns what the last device's previous connection came to.
    @discardableResult
    func attach(_ addresses: [DeviceAddress], to connection: GatewayConnection) -> Previous {
        var previous = Previous()
        var displaced: [(GatewayConnection, DeviceAddress)] = []
        var expired: [PushFrame] = []
        let instant = now()
        for address in addresses {
            shard(for: address).devices.withLock { devices in
                var entry = devices[address] ?? DeviceEntry()
                if let old = entry.connection, old !== connection {
                    displaced.append((old, address))
                }
                previous = Previous(offlineSince: entry.offlineSince, tookOver: entry.connection.map { $0 !== connection } ?? false)
                entry.offlineSince = nil
                let wasOnline = entry.connection != nil
                entry.connection = connection
                // An unsubscribed Web Push endpoint stays gone: the browser subscribes anew.
                if entry.webPush?.unsubscribed != true { entry.unregisteredAt = nil }
                connection.insert(address)
                func sendHeld(_ pending: StoredPush) {
                    held.subtract(1, ordering: .relaxed)
                    if pending.expiresAt > instant {
                        var frame = pending.frame
                        frame.stored = true
                        connection.send(frame, tracked: watchers.isActive, expiresAt: pending.expiresAt)
                        counters.withLock {
                            $0.delivered += 1
                            $0.storedDelivered += 1
                        }
                    } else {
                        counters.withLock { $0.expired += 1 }
                        expired.append(pending.frame)
                    }
                }
                if let pending = entry.pending { sendHeld(pending) }
                for pending in entry.queued { sendHeld(pending) }
                entry.pending = nil
                entry.queued = []
                devices[address] = entry
                if !wasOnline { counters.withLock { $0.online += 1 } }
            }
        }
        takeOffline(displaced, reason: "replaced")
        for frame in expired { report(.expired, of: frame, at: instant) }
        return previous
    }

    /// Takes the devices offline if `connection` still holds them; `closedAt`, when the
    /// connection was a device's own and ended then.
    func detach(_ addresses: [DeviceAddress], from connection: GatewayConnection, closedAt: Int64? = nil) {
        for address in addresses {
            connection.remove(address)
            shard(for: address).devices.withLock { devices in
                guard var entry = devices[address], entry.connection === connection else { return }
                entry.connection = nil
                entry.offlineSince = closedAt
                devices[address] = entry.isDisposable ? nil : entry
                counters.withLock { $0.online -= 1 }
            }
        }
    }

    /// Marks the tokens unregistered (the app was removed): later pushes are refused as
    /// Unregistered until the device subscribes again. Any held push is discarded.
    func unregister(_ addresses: [DeviceAddress]) {
        let instant = now()
        let since = instant / 1_000_000
        var discarded: [PushFrame] = []
        for address in addresses {
            shard(for: address).devices.withLock { devices in
                var entry = devices[address] ?? DeviceEntry()
                entry.unregisteredAt = since
                if let pending = entry.pending {
                    held.subtract(1, ordering: .relaxed)
                    discarded.append(pending.frame)
                }
                for pending in entry.queued {
                    held.subtract(1, ordering: .relaxed)
                    discarded.append(pending.frame)
                }
                entry.pending = nil
                entry.queued = []
                devices[address] = entry
            }
        }
        for frame in discarded { report(.unregistered, of: frame, at: instant) }
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
                connection.send(GatewayNotice(type: .disconnected, devices: addresses, reason: reason))
            }
        }
    }
}
