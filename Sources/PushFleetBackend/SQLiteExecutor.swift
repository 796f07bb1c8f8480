import Foundation
import NIOCore
import PushFleetCore
import SQLiteNIO

/// One unit of work at a time, in arrival order: SQLite has one writer, and a unit of work
/// spans several awaited statements.
actor AsyncGate {
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func enter() async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func leave() {
        if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
    }
}

/// SQLite through sqlite-nio (libsqlite3 calls on NIO's thread pool), in WAL mode.
final class SQLiteExecutor: SQLExecutor {
    let connection: SQLiteConnection
    let gate = AsyncGate()
    let file: SQLiteFile

    private init(connection: SQLiteConnection, file: SQLiteFile) {
        self.connection = connection
        self.file = file
    }

    /// - Parameter pragmas: run after the defaults (a test caps the size with `max_page_count`).
    static func open(path: String, pragmas: [String] = []) async throws -> SQLiteExecutor {
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        let executor = SQLiteExecutor(connection: connection, file: SQLiteFile(path: path))
        do {
            _ = try await connection.query("PRAGMA journal_mode=WAL")
            _ = try await connection.query("PRAGMA busy_timeout=5000")
            for pragma in pragmas { _ = try await connection.query(pragma) }
            for statement in SQLStore<SQLiteExecutor>.schema { _ = try await connection.query(statement) }
        } catch {
            // A setup that fails (a full disk) must not drop an open connection: sqlite-nio
            // traps on one deinitialized unclosed, and the file would stay locked.
            await executor.close()
            throw executor.file.storeError(error)
        }
        return executor
    }

    struct Session: SQLSession {
        let connection: SQLiteConnection

        func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]] {
            let data: [SQLiteData] = binds.map {
                switch $0 {
                case .int(let value): .integer(Int(value))
                case .text(let value): .text(value)
                case .blob(let value): .blob(ByteBuffer(bytes: value))
                case .null: .null
                }
            }
            return try await connection.query(sql, data).map { row in
                row.columns.map { column in
                    switch column.data {
                    case .integer(let value): .int(Int64(value))
                    case .float(let value): .int(Int64(value))
                    case .text(let value): .text(value)
                    case .blob(let buffer): .blob(Data(buffer.readableBytesView))
                    case .null: .null
                    }
                }
            }
        }
    }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) async throws -> T) async throws -> T {
        // Before every unit of work, not on a timer: a stat costs a microsecond, and a write
        // acknowledged into a deleted file is lost at the next restart.
        try file.checkInPlace()
        await gate.enter()
        let session = Session(connection: connection)
        do {
            try await session.run("BEGIN IMMEDIATE")
            let result = try await body(session)
            try await session.run("COMMIT")
            await gate.leave()
            return result
        } catch {
            try? await session.run("ROLLBACK")
            await gate.leave()
            throw file.storeError(error)
        }
    }

    /// Closes even from a cancelled task (a backend being stopped): an open handle left behind
    /// would keep the file locked.
    func close() async {
        let connection = connection
        await Task { try? await connection.close() }.value
    }
}
