/// How the store is failing, as answers, `/stats` and the log name it.
enum StoreProblem: String, Sendable, Equatable {
    /// A configured limit (`StoreLimits`) is reached: 507.
    case limit = "store_limit"
    /// No space for a write: the disk, or the database's own size cap (SQLITE_FULL, ENOSPC,
    /// PostgreSQL's disk_full): 507.
    case full = "store_full"
    /// The database cannot be reached, or the SQLite file was deleted or replaced under the
    /// server: 503.
    case unreachable = "store_unreachable"

    var status: Int { self == .unreachable ? 503 : 507 }
}

/// Episodes of store failure, so that each is logged once rather than per request.
///
/// An episode starts at the first call refused for a problem other than the current one, and
/// ends at the first call that proves the problem gone: any successful call for `unreachable`,
/// a successful write for `full` and `limit` (reads keep working on a full disk, so they prove
/// nothing). Pure: the backend logs and counts what it returns.
struct StoreHealth: Sendable, Equatable {
    enum Action: Equatable {
        case none
        /// Log that the store started failing so (and that every such call is refused).
        case started(StoreProblem)
        /// Log that the episode of this problem is over.
        case ended(StoreProblem)
    }

    private(set) var current: StoreProblem?

    /// A call the store refused for `problem`.
    mutating func refused(_ problem: StoreProblem) -> Action {
        guard current != problem else { return .none }
        current = problem
        return .started(problem)
    }

    /// A call the store answered; `wrote` when it changed the store.
    mutating func succeeded(wrote: Bool) -> Action {
        guard let problem = current, wrote || problem == .unreachable else { return .none }
        current = nil
        return .ended(problem)
    }
}
