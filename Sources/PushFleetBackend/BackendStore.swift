import PushFleetCore
import PushFleetWire
import Synchronization

/// Where the backend keeps registrations (with their tag index) and stored secure and rich
/// notifications. One protocol, three drivers: memory (the default), SQLite and PostgreSQL, held
/// to the same contract (`BackendStoreContractTests`). Times are wall-clock nanoseconds, since a
/// persistent store outlives the process; expiry and limits are enforced by every driver.
protocol BackendStore: Sendable {
    /// `POST /api/register[?handle=H]`: the caller's live registration bound to H (renewed), with
    /// every other registration of H deleted; otherwise a new id.
    func createRegistration(owner: String, handle: String?, now: Int64) async throws -> String
    func updateRegistration(id: String, owner: String, platform: Platform, handle: String, tags: Set<String>, now: Int64) async throws
        -> RegistrationStore.UpdateResult
    func deleteRegistration(id: String, owner: String, now: Int64) async throws -> RegistrationStore.UpdateResult
    /// Live, complete registrations carrying `tag`.
    func targets(tag: String, now: Int64) async throws -> [RegistrationStore.Registration]
    /// The push service's feedback: removes the registration unless it was re-bound since.
    func removeDead(id: String, handle: String) async throws -> Bool
    func createNotification(sender: String, recipient: String, content: NotificationStore.Content, now: Int64) async throws
        -> NotificationStore.Notification
    /// The notification if `reader` is its recipient (marking it read); nil otherwise.
    func readNotification(id: String, reader: String, now: Int64) async throws -> NotificationStore.Notification?
    func counts() async throws -> (registrations: Int, notifications: Int)
    func sweep(now: Int64) async throws
    func close() async
}

/// Bounds every driver enforces; past one, the call is refused (507) rather than growing.
public struct StoreLimits: Sendable, Equatable {
    public var maxRegistrations: Int
    public var maxNotifications: Int
    /// Payload and image bytes of all stored notifications.
    public var maxNotificationBytes: Int

    public init(maxRegistrations: Int = 2_000_000, maxNotifications: Int = 1_000_000, maxNotificationBytes: Int = 2 << 30) {
        self.maxRegistrations = maxRegistrations
        self.maxNotifications = maxNotifications
        self.maxNotificationBytes = maxNotificationBytes
    }
}

/// A store call that failed for the store's sake, not the caller's; answered with the
/// problem's status and reason (``StoreProblem``).
enum StoreError: Error, CustomStringConvertible {
    /// A ``StoreLimits`` bound is reached.
    case limit(String)
    /// No space for the write (a full disk, a database at its size cap).
    case full(String)
    case unavailable(String)

    var problem: StoreProblem {
        switch self {
        case .limit: .limit
        case .full: .full
        case .unavailable: .unreachable
        }
    }

    var description: String {
        switch self {
        case .limit(let what): "the store is full: \(what)"
        case .full(let why): "the store has no space left: \(why)"
        case .unavailable(let why): "the store is unavailable: \(why)"
        }
    }
}

extension NotificationStore.Content {
    /// What counts against ``StoreLimits/maxNotificationBytes``.
    var byteCount: Int {
        switch self {
        case .secure(let payload): payload.utf8.count
        case .rich(let message, let type, let contentType, let data): message.utf8.count + type.utf8.count + contentType.utf8.count + data.count
        }
    }
}

/// The in-memory driver: the two indexed stores, with the limits.
final class MemoryStore: BackendStore {
    let registrations: RegistrationStore
    let notifications: NotificationStore
    let limits: StoreLimits

    init(registrationTTL: Duration, notificationTTL: Duration, limits: StoreLimits) {
        registrations = RegistrationStore(ttl: registrationTTL, maxCount: limits.maxRegistrations)
        notifications = NotificationStore(ttl: notificationTTL, maxCount: limits.maxNotifications, maxBytes: limits.maxNotificationBytes)
        self.limits = limits
    }

    func createRegistration(owner: String, handle: String?, now: Int64) throws -> String {
        guard let id = registrations.create(owner: owner, handle: handle, now: now) else {
            throw StoreError.limit("\(limits.maxRegistrations) registrations")
        }
        return id
    }

    func updateRegistration(id: String, owner: String, platform: Platform, handle: String, tags: Set<String>, now: Int64)
        -> RegistrationStore.UpdateResult
    {
        registrations.update(id: id, owner: owner, platform: platform, handle: handle, tags: tags, now: now)
    }

    func deleteRegistration(id: String, owner: String, now: Int64) -> RegistrationStore.UpdateResult {
        registrations.delete(id: id, owner: owner, now: now)
    }

    func targets(tag: String, now: Int64) -> [RegistrationStore.Registration] {
        registrations.targets(tag: tag, platform: nil, now: now)
    }

    func removeDead(id: String, handle: String) -> Bool {
        registrations.removeDead(id: id, handle: handle)
    }

    func createNotification(sender: String, recipient: String, content: NotificationStore.Content, now: Int64) throws
        -> NotificationStore.Notification
    {
        guard let stored = notifications.create(sender: sender, recipient: recipient, content: content, now: now) else {
            throw StoreError.limit("\(limits.maxNotifications) notifications or \(limits.maxNotificationBytes) bytes")
        }
        return stored
    }

    func readNotification(id: String, reader: String, now: Int64) -> NotificationStore.Notification? {
        notifications.read(id: id, reader: reader, now: now)
    }

    func counts() -> (registrations: Int, notifications: Int) {
        (registrations.count, notifications.count)
    }

    func sweep(now: Int64) {
        registrations.sweep(now: now)
        notifications.sweep(now: now)
    }

    func close() {}
}

/// Opens the configured store once, on first use, so that a backend can be built synchronously
/// and a database reached lazily; every caller waits for the same opening.
final class StoreHandle: Sendable {
    private let opening: Mutex<Task<any BackendStore, any Error>?> = Mutex(nil)
    private let open: @Sendable () async throws -> any BackendStore
    private let openMemory: Mutex<MemoryStore?> = Mutex(nil)

    /// The store when it is the in-memory one and open: the event-loop routes read it without
    /// waiting.
    var memory: MemoryStore? { openMemory.withLock { $0 } }

    init(_ open: @escaping @Sendable () async throws -> any BackendStore) {
        self.open = open
    }

    /// The store; an opening that failed (a database not up yet, a full disk) is tried again
    /// by the next call rather than kept as every call's answer.
    func get() async throws -> any BackendStore {
        let task = opening.withLock { task in
            if let task { return task }
            let new = Task { try await open() }
            task = new
            return new
        }
        do {
            let store = try await task.value
            if self.memory == nil, let memory = store as? MemoryStore { openMemory.withLock { $0 = memory } }
            return store
        } catch {
            opening.withLock { if $0 == task { $0 = nil } }
            throw error
        }
    }

    func close() async {
        guard let task = opening.withLock({ $0 }) else { return }
        if let store = try? await task.value { await store.close() }
    }
}
