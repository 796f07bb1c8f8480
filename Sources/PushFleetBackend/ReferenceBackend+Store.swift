import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PushFleetCore
import PushFleetWire
import Synchronization

extension ReferenceBackend {
    /// The store, opened on first use; one that cannot be opened is refused as unreachable.
    func store() async throws -> any BackendStore {
        do {
            return try await storeHandle.get()
        } catch {
            throw refused(error as? StoreError ?? .unavailable("\(configuration.store): \(error)"))
        }
    }

    /// Runs a store call. A failure of the store's own is answered with its problem's status
    /// and reason (507 `store_limit` or `store_full`, 503 `store_unreachable`), counted, and
    /// logged once per episode (``StoreHealth``).
    /// - Parameter writes: whether the call changes the store; a read that succeeds on a full
    ///   store proves nothing about the writes that fail.
    func storing<T>(writes: Bool = true, _ body: (any BackendStore) async throws -> T) async throws -> T {
        let store = try await store()
        do {
            let result = try await TracePropagation.measure(
                writes ? "store write" : "store read", attributes: [("db.system.name", .string(configuration.store.systemName))]
            ) { try await body(store) }
            storeSucceeded(writes: writes)
            return result
        } catch let error as StoreError {
            throw refused(error)
        }
    }

    /// A store call that worked: it may end a failing episode (``StoreHealth``).
    func storeSucceeded(writes: Bool) {
        act(on: health.withLock { $0.succeeded(wrote: writes) })
    }

    /// Counts and logs a refused call; the error to answer it with.
    private func refused(_ error: StoreError) -> StoreFailure {
        let problem = error.problem
        let (action, current) = health.withLock { health in (health.refused(problem), health.current) }
        counters.update { stats in
            if problem == .unreachable { stats.storeUnreachable += 1 } else { stats.storeFull += 1 }
            stats.storeProblem = current?.rawValue
        }
        act(on: action, detail: error.description)
        return StoreFailure(problem: problem, message: error.description)
    }

    private func act(on action: StoreHealth.Action, detail: String = "") {
        // Called on every store call: the log's metadata is made only when there is news.
        var metadata: Logger.Metadata { ["store": "\(configuration.store)"] }
        switch action {
        case .none:
            return
        case .started(let problem):
            counters.update { $0.storeProblem = problem.rawValue }
            logger.withLock { logger in
                logger.error(
                    "store failing (\(problem.rawValue)): calls that need it are answered \(problem.status) until it works again: \(detail)",
                    metadata: metadata
                )
            }
        case .ended(let problem):
            counters.update { $0.storeProblem = nil }
            logger.withLock { $0.notice("store works again after \(problem.rawValue)", metadata: metadata) }
        }
    }
}

/// A call the store refused, as the client sees it: the problem's status and
/// `{"error":{"message":…,"reason":…}}` (the reason is what a fleet's error label carries).
struct StoreFailure: HTTPResponseError {
    var problem: StoreProblem
    var message: String

    var status: HTTPResponse.Status {
        problem == .unreachable ? .serviceUnavailable : .init(code: 507, reasonPhrase: "Insufficient Storage")
    }

    private struct Body: Encodable {
        struct Detail: Encodable {
            var message: String
            var reason: String
        }

        var error: Detail
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let data = try JSONEncoder().encode(Body(error: .init(message: message, reason: problem.rawValue)))
        return Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: data))
        )
    }
}

extension StoreLocation {
    /// OpenTelemetry's `db.system.name` for the store (`memory` is the backend's own).
    var systemName: String {
        switch self {
        case .memory: "memory"
        case .sqlite: "sqlite"
        case .postgres: "postgresql"
        }
    }
}
