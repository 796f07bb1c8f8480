import Foundation
import PushFleetCore
import PushFleetWire

/// A value bound to or read from SQL.
enum SQLValue: Sendable, Equatable {
    case int(Int64)
    case text(String)
    case blob(Data)
    case null

    var int: Int64? { if case .int(let value) = self { value } else { nil } }
    var text: String? { if case .text(let value) = self { value } else { nil } }
    var blob: Data? { if case .blob(let value) = self { value } else { nil } }
}

/// What a SQL database driver gives ``SQLStore``: statements (with `?` placeholders, rewritten
/// per dialect by the driver) run as one atomic unit.
protocol SQLExecutor: Sendable {
    /// Runs `body` in one transaction; no other unit of work interleaves with its statements.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) async throws -> T) async throws -> T
    func close() async
}

protocol SQLSession: Sendable {
    func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]]
}

extension SQLSession {
    func run(_ sql: String, _ binds: [SQLValue] = []) async throws {
        _ = try await rows(sql, binds)
    }
}

/// Registrations, their tags and stored notifications in SQL tables, for SQLite and PostgreSQL
/// alike; the semantics are the memory driver's, statement for statement.
final class SQLStore<Executor: SQLExecutor>: BackendStore {
    let executor: Executor
    let registrationTTL: Int64
    let notificationTTL: Int64
    let limits: StoreLimits

    init(executor: Executor, configuration: BackendConfiguration) {
        self.executor = executor
        registrationTTL = configuration.registrationTTL.nanosecondCount
        notificationTTL = configuration.notificationTTL.nanosecondCount
        limits = configuration.storeLimits
    }

    /// The schema, with `BLOB`/`INTEGER` as written for SQLite; the PostgreSQL driver maps them.
    static var schema: [String] {
        [
            """
            CREATE TABLE IF NOT EXISTS registrations (id TEXT PRIMARY KEY, owner TEXT NOT NULL, platform TEXT, handle TEXT,
            expires_at INTEGER NOT NULL, created_at INTEGER NOT NULL, serial INTEGER NOT NULL)
            """,
            "CREATE INDEX IF NOT EXISTS registrations_handle ON registrations (handle)",
            "CREATE TABLE IF NOT EXISTS registration_tags (tag TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (tag, id))",
            "CREATE INDEX IF NOT EXISTS registration_tags_id ON registration_tags (id)",
            """
            CREATE TABLE IF NOT EXISTS notifications (id TEXT PRIMARY KEY, sender TEXT NOT NULL, recipient TEXT NOT NULL,
            kind TEXT NOT NULL, payload TEXT, message TEXT, rich_type TEXT, content_type TEXT, data BLOB, was_read INTEGER NOT NULL,
            expires_at INTEGER NOT NULL, bytes INTEGER NOT NULL)
            """,
            "CREATE INDEX IF NOT EXISTS notifications_expiry ON notifications (expires_at)",
            "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ]
    }

    func createRegistration(owner: String, handle: String?, now: Int64) async throws -> String {
        let ttl = registrationTTL
        let maxCount = limits.maxRegistrations
        return try await executor.transaction { db in
            if let handle {
                let bound = try await db.rows(
                    "SELECT id, owner, expires_at FROM registrations WHERE handle = ? ORDER BY serial", [.text(handle)]
                )
                var kept: String?
                for row in bound {
                    let id = row[0].text ?? ""
                    if kept == nil && row[1].text == owner && (row[2].int ?? 0) > now {
                        kept = id
                    } else {
                        try await Self.remove(id, db)
                    }
                }
                if let kept {
                    try await db.run("UPDATE registrations SET expires_at = ? WHERE id = ?", [.int(now + ttl), .text(kept)])
                    return kept
                }
            }
            let count = try await db.rows("SELECT COUNT(*) FROM registrations", []).first?.first?.int ?? 0
            guard count < maxCount else { throw StoreError.limit("\(maxCount) registrations") }
            let serial = (try await db.rows("SELECT COALESCE(MAX(serial), 0) + 1 FROM registrations", []).first?.first?.int) ?? 1
            let id = UUIDText.unguessable(upper: false)
            try await db.run(
                "INSERT INTO registrations (id, owner, platform, handle, expires_at, created_at, serial) VALUES (?, ?, NULL, NULL, ?, ?, ?)",
                [.text(id), .text(owner), .int(now + ttl), .int(now), .int(serial)]
            )
            return id
        }
    }

    static func remove(_ id: String, _ db: any SQLSession) async throws {
        try await db.run("DELETE FROM registration_tags WHERE id = ?", [.text(id)])
        try await db.run("DELETE FROM registrations WHERE id = ?", [.text(id)])
    }

    /// The owner of a live registration; an expired one is removed and reads as absent.
    static func liveOwner(_ id: String, now: Int64, _ db: any SQLSession) async throws -> String? {
        guard let row = try await db.rows("SELECT owner, expires_at FROM registrations WHERE id = ?", [.text(id)]).first else { return nil }
        guard (row[1].int ?? 0) > now else {
            try await remove(id, db)
            return nil
        }
        return row[0].text
    }

    func updateRegistration(id: String, owner: String, platform: Platform, handle: String, tags: Set<String>, now: Int64) async throws
        -> RegistrationStore.UpdateResult
    {
        let ttl = registrationTTL
        return try await executor.transaction { db in
            guard let current = try await Self.liveOwner(id, now: now, db) else { return .gone }
            guard current == owner else { return .notOwner }
            try await db.run(
                "UPDATE registrations SET platform = ?, handle = ?, expires_at = ? WHERE id = ?",
                [.text(platform.rawValue), .text(handle), .int(now + ttl), .text(id)]
            )
            try await db.run("DELETE FROM registration_tags WHERE id = ?", [.text(id)])
            for tag in tags.sorted() {
                try await db.run("INSERT INTO registration_tags (tag, id) VALUES (?, ?)", [.text(tag), .text(id)])
            }
            return .updated
        }
    }

    func deleteRegistration(id: String, owner: String, now: Int64) async throws -> RegistrationStore.UpdateResult {
        try await executor.transaction { db in
            guard let current = try await Self.liveOwner(id, now: now, db) else { return .gone }
            guard current == owner else { return .notOwner }
            try await Self.remove(id, db)
            return .updated
        }
    }

    func targets(tag: String, now: Int64) async throws -> [RegistrationStore.Registration] {
        try await executor.transaction { db in
            try await db.rows(
                """
                SELECT r.id, r.owner, r.platform, r.handle, r.expires_at FROM registration_tags t JOIN registrations r ON r.id = t.id
                WHERE t.tag = ? AND r.expires_at > ? AND r.platform IS NOT NULL AND r.handle IS NOT NULL ORDER BY r.serial
                """,
                [.text(tag), .int(now)]
            ).compactMap { row in
                guard let id = row[0].text, let owner = row[1].text, let platform = row[2].text.flatMap(Platform.init(rawValue:)) else { return nil }
                return RegistrationStore.Registration(id: id, owner: owner, platform: platform, handle: row[3].text, tags: [tag], expiresAt: row[4].int ?? 0)
            }
        }
    }

    func removeDead(id: String, handle: String) async throws -> Bool {
        try await executor.transaction { db in
            guard try await !db.rows("SELECT id FROM registrations WHERE id = ? AND handle = ?", [.text(id), .text(handle)]).isEmpty else {
                return false
            }
            try await Self.remove(id, db)
            return true
        }
    }

    func createNotification(sender: String, recipient: String, content: NotificationStore.Content, now: Int64) async throws
        -> NotificationStore.Notification
    {
        let notification = NotificationStore.Notification(
            id: UUIDText.unguessable(upper: false), sender: sender, recipient: recipient, content: content, read: false,
            expiresAt: now + notificationTTL
        )
        let limits = limits
        try await executor.transaction { db in
            let totals = try await db.rows("SELECT COUNT(*), CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM notifications", []).first ?? []
            let count = totals.first?.int ?? 0
            let bytes = totals.count > 1 ? totals[1].int ?? 0 : 0
            guard count < limits.maxNotifications, bytes + Int64(content.byteCount) <= Int64(limits.maxNotificationBytes) else {
                throw StoreError.limit("\(limits.maxNotifications) notifications or \(limits.maxNotificationBytes) bytes")
            }
            var values: [SQLValue] = [.text(notification.id), .text(sender), .text(recipient)]
            switch content {
            case .secure(let payload):
                values += [.text("secure"), .text(payload), .null, .null, .null, .null]
            case .rich(let message, let type, let contentType, let data):
                values += [.text("rich"), .null, .text(message), .text(type), .text(contentType), .blob(data)]
            }
            values += [.int(0), .int(notification.expiresAt), .int(Int64(content.byteCount))]
            try await db.run(
                """
                INSERT INTO notifications (id, sender, recipient, kind, payload, message, rich_type, content_type, data, was_read, expires_at, bytes)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                values
            )
        }
        return notification
    }

    func readNotification(id: String, reader: String, now: Int64) async throws -> NotificationStore.Notification? {
        try await executor.transaction { db in
            guard
                let row = try await db.rows(
                    "SELECT sender, recipient, kind, payload, message, rich_type, content_type, data, was_read, expires_at FROM notifications WHERE id = ?",
                    [.text(id)]
                ).first
            else { return nil }
            let expiresAt = row[9].int ?? 0
            guard expiresAt > now else {
                try await db.run("DELETE FROM notifications WHERE id = ?", [.text(id)])
                return nil
            }
            guard row[1].text == reader else { return nil }
            let content: NotificationStore.Content =
                row[2].text == "secure"
                ? .secure(payload: row[3].text ?? "")
                : .rich(message: row[4].text ?? "", type: row[5].text ?? "img", contentType: row[6].text ?? "image/png", data: row[7].blob ?? Data())
            try await db.run("UPDATE notifications SET was_read = 1 WHERE id = ?", [.text(id)])
            return NotificationStore.Notification(
                id: id, sender: row[0].text ?? "", recipient: reader, content: content, read: (row[8].int ?? 0) != 0, expiresAt: expiresAt
            )
        }
    }

    func counts() async throws -> (registrations: Int, notifications: Int) {
        try await executor.transaction { db in
            let registrations = try await db.rows("SELECT COUNT(*) FROM registrations", []).first?.first?.int ?? 0
            let notifications = try await db.rows("SELECT COUNT(*) FROM notifications", []).first?.first?.int ?? 0
            return (Int(registrations), Int(notifications))
        }
    }

    func sweep(now: Int64) async throws {
        try await executor.transaction { db in
            try await db.run("DELETE FROM registration_tags WHERE id IN (SELECT id FROM registrations WHERE expires_at <= ?)", [.int(now)])
            try await db.run("DELETE FROM registrations WHERE expires_at <= ?", [.int(now)])
            try await db.run("DELETE FROM notifications WHERE expires_at <= ?", [.int(now)])
        }
    }

    func close() async {
        await executor.close()
    }
}

enum SQLiteStore {
    static func open(path: String, configuration: BackendConfiguration) async throws -> any BackendStore {
        do {
            return SQLStore(executor: try await SQLiteExecutor.open(path: path), configuration: configuration)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.unavailable("cannot open sqlite:\(path): \(error)")
        }
    }
}

enum PostgresStore {
    static func open(url: String, configuration: BackendConfiguration) async throws -> any BackendStore {
        SQLStore(executor: try await PostgresExecutor.open(url: url, deadline: configuration.storeDeadline), configuration: configuration)
    }
}
