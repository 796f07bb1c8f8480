import Foundation
import Synchronization
import Logging
import NIOCore
import PostgresNIO
import PushFleetCore

/// PostgreSQL through postgres-nio's pooled client; each unit of work is one transaction on
/// one pooled connection.
final class PostgresExecutor: SQLExecutor {
    let client: PostgresClient
    let runner: Task<Void, Never>
    let logger: Logger
    /// The URL without its password, for messages.
    let location: String
    /// How long a unit of work may take, waiting for a connection included: with the server
    /// gone, the pool keeps reconnecting and a request would wait for one indefinitely.
    let deadline: Duration

    private init(client: PostgresClient, logger: Logger, location: String, deadline: Duration) {
        self.client = client
        self.logger = logger
        self.location = location
        self.deadline = deadline
        runner = Task { await client.run() }
    }

    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`; `?host=/socket/dir` for a Unix socket.
    static func open(url: String, deadline: Duration) async throws -> PostgresExecutor {
        guard let components = URLComponents(string: url), let user = components.user, !user.isEmpty else {
            throw StoreError.unavailable("a postgres URL needs a user: postgres://USER:PASSWORD@HOST:PORT/DATABASE")
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : nil
        let socketDirectory = components.queryItems?.first { $0.name == "host" }?.value
        let configuration: PostgresClient.Configuration
        if let socketDirectory {
            let port = components.port ?? 5432
            configuration = .init(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user, password: components.password, database: database
            )
        } else {
            guard let host = components.host, !host.isEmpty else { throw StoreError.unavailable("the postgres URL names no host") }
            configuration = .init(host: host, port: components.port ?? 5432, username: user, password: components.password, database: database, tls: .disable)
        }
        var logger = Logger(label: "pushfleet.store.postgres")
        logger.logLevel = .warning
        let executor = PostgresExecutor(
            client: PostgresClient(configuration: configuration), logger: logger, location: StoreLocationDescription.masked(url),
            deadline: deadline
        )
        do {
            try await executor.transaction(within: max(deadline, Self.openDeadline)) { db in
                // One schema creation at a time across processes.
                try await db.run("SELECT pg_advisory_xact_lock(74736)")
                for statement in SQLStore<PostgresExecutor>.schema { try await db.run(statement) }
            }
        } catch {
            await executor.close()
            throw StoreError.unavailable("cannot reach \(StoreLocationDescription.masked(url)): \(String(reflecting: error))")
        }
        return executor
    }

    struct Session: SQLSession {
        let connection: PostgresConnection
        let logger: Logger

        /// `?` → `$n`, and SQLite's column types → PostgreSQL's.
        static func dialect(_ sql: String) -> String {
            var result = ""
            var index = 0
            for character in sql {
                if character == "?" {
                    index += 1
                    result += "$\(index)"
                } else {
                    result.append(character)
                }
            }
            return result.replacingOccurrences(of: " BLOB", with: " BYTEA").replacingOccurrences(of: " INTEGER", with: " BIGINT")
        }

        func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]] {
            var bindings = PostgresBindings()
            for bind in binds {
                switch bind {
                case .int(let value): bindings.append(value)
                case .text(let value): bindings.append(value)
                case .blob(let value): bindings.append(ByteBuffer(bytes: value))
                case .null: bindings.appendNull()
                }
            }
            let result = try await connection.query(PostgresQuery(unsafeSQL: Self.dialect(sql), binds: bindings), logger: logger)
            var rows: [[SQLValue]] = []
            for try await row in result {
                rows.append(
                    try row.map { cell -> SQLValue in
                        guard cell.bytes != nil else { return .null }
                        switch cell.dataType {
                        case .int2, .int4, .int8, .numeric: return .int(try cell.decode(Int64.self))
                        case .bytea: return .blob(Data(try cell.decode(ByteBuffer.self).readableBytesView))
                        default: return .text(try cell.decode(String.self))
                        }
                    }
                )
            }
            return rows
        }
    }

    /// How long the first unit of work may take: the first connection and the schema, on a
    /// server that may still be starting or busy with other clients' schemas.
    static let openDeadline: Duration = .seconds(30)

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) async throws -> T) async throws -> T {
        try await transaction(within: deadline, body)
    }

    private func transaction<T: Sendable>(within deadline: Duration, _ body: @escaping @Sendable (any SQLSession) async throws -> T) async throws -> T {
        let logger = logger
        let client = client
        let location = location
        do {
            let result = try await Self.first(within: deadline) {
                try await client.withTransaction(logger: logger) { connection in
                    try await body(Session(connection: connection, logger: logger))
                }
            }
            guard let result else { throw StoreError.unavailable("\(location) did not answer within \(deadline)") }
            return result
        } catch {
            throw Self.storeError(error, location: location)
        }
    }

    /// The operation's outcome, or nil once `deadline` passes. Unlike a task group this does not
    /// wait for the operation to end: a lease or query on a dead connection that ignores
    /// cancellation must not hold the request (or the shutdown) forever.
    static func first<T: Sendable>(within deadline: Duration, _ operation: @escaping @Sendable () async throws -> T) async throws -> T? {
        let work = Task { try await operation() }
        let outcome = ResumeOnce<T?>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T?, any Error>) in
                outcome.set(continuation)
                let timer = Task {
                    // Cancelled: the work answered first, and its answer is the outcome.
                    do { try await Task.sleep(for: deadline) } catch { return }
                    outcome.resume(.success(nil))
                    work.cancel()
                }
                Task {
                    let result = await work.result
                    outcome.resume(result.map { $0 })
                    timer.cancel()
                }
            }
        } onCancel: {
            work.cancel()
            outcome.resume(.failure(CancellationError()))
        }
    }

    /// A continuation resumed by whichever comes first; later outcomes are dropped.
    final class ResumeOnce<T: Sendable>: Sendable {
        private let state = Mutex<(continuation: CheckedContinuation<T, any Error>?, early: Result<T, any Error>?)>((nil, nil))

        func set(_ continuation: CheckedContinuation<T, any Error>) {
            let early: Result<T, any Error>? = state.withLock { state in
                if let early = state.early { return early }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(with: early) }
        }

        func resume(_ result: Result<T, any Error>) {
            let continuation: CheckedContinuation<T, any Error>? = state.withLock { state in
                guard let continuation = state.continuation else {
                    if state.early == nil { state.early = result }
                    return nil
                }
                state.continuation = nil
                state.early = result
                return continuation
            }
            continuation?.resume(with: result)
        }
    }

    /// The store's own errors as they went in, whatever the driver wraps them in; the server's
    /// disk_full as `full`; a lost or refused connection, or a server shutting down, as
    /// `unavailable`. Other server errors (a statement the store got wrong) stay as they are.
    static func storeError(_ error: any Error, location: String) -> any Error {
        var error = error
        if let wrapped = error as? PostgresTransactionError {
            error = wrapped.closureError ?? wrapped.beginError ?? wrapped.commitError ?? error
        }
        if error is StoreError || error is CancellationError { return error }
        guard let psql = error as? PSQLError, psql.code == .server else {
            return StoreError.unavailable("\(location): \(String(reflecting: error))")
        }
        let state = psql.serverInfo?[.sqlState] ?? ""
        let message = psql.serverInfo?[.message] ?? ""
        if state == "53100" { return StoreError.full("\(location): \(message)") }
        // 08: connection exceptions; 57P: the server shutting down or starting; 53: out of resources.
        if state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53") {
            return StoreError.unavailable("\(location): \(state) \(message)")
        }
        return error
    }

    /// Ends the pool; bounded, since a connection stuck on a vanished server may not end at once.
    func close() async {
        runner.cancel()
        let runner = runner
        _ = try? await Self.first(within: .seconds(5)) { await runner.value }
    }
}

enum StoreLocationDescription {
    static func masked(_ url: String) -> String {
        StoreLocation.postgres(url: url).description
    }
}
