/// Counters of the mock push service (`GET /admin/stats`), totals since start.
public struct PushServiceStats: Codable, Sendable, Equatable {
    /// Pushes answered with success.
    public var accepted: Int = 0
    /// Pushes written to an online device's connection (stored ones included).
    public var delivered: Int = 0
    /// Pushes held for an offline device.
    public var stored: Int = 0
    /// Held pushes delivered when their device came online.
    public var storedDelivered: Int = 0
    /// Held pushes replaced by a newer one for the same device (one is kept per device, as APNs does).
    public var storedReplaced: Int = 0
    /// Pushes a device never acknowledged before its connection ended, handed back to the hold
    /// (connections opened with `ack=1` only).
    public var requeued: Int = 0
    /// Held FCM messages discarded because their device's hold passed 100 (as FCM does, telling the app).
    public var discardedHeld: Int = 0
    /// Held pushes that expired before their device came online.
    public var expired: Int = 0
    /// Pushes for an offline device that asked not to be stored (`apns-expiration: 0`, WNS no-cache).
    public var discardedOffline: Int = 0
    /// Pushes held for offline devices now.
    public var held: Int = 0
    /// Pushes for an offline device that were not held because the service held its maximum.
    public var heldFull: Int = 0
    /// Accepted pushes removed by the drop fault.
    public var dropped: Int = 0
    /// Rejected requests by reason (`BadDeviceToken`, `Unregistered`, `TooManyRequests`, …).
    public var rejected: [String: Int] = [:]
    /// Devices online now.
    public var online: Int = 0
    /// Gateway connections open now.
    public var connections: Int = 0
    /// Devices disconnected by the service (forced disconnect or takeover).
    public var forcedDisconnects: Int = 0
    /// Device WebSockets the gateway ports hold at most (the rest of their connections are kept
    /// for providers and admin), and hold now; nil from a push service that does not say.
    public var deviceCap: Int?
    public var deviceSockets: Int?
    /// Device WebSocket upgrades refused at the cap (503), and the times the cap was reached.
    public var deviceCapRefused: Int?
    public var deviceCapReached: Int?
    /// Web Push subscriptions minted; nil from a push service that does not say.
    public var webPushSubscriptions: Int?
    /// The service's event loops, one entry each; nil from a push service that does not say.
    public var loops: [LoopLoad]?
    /// The service's process; nil from a push service that does not say.
    public var process: ProcessLoad?

    public init() {}
}
