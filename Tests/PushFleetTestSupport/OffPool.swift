import Foundation

/// Runs blocking work (a child process, a blocking socket) on a thread of its own: the suites
/// run in parallel on Swift's concurrency pool, which has one thread per core, and a test that
/// blocks one of them stalls every other test's servers.
package func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
