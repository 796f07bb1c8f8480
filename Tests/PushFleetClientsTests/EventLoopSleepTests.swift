import NIOCore
import NIOPosix
import Testing

import PushFleetClients

/// A task's wait on its event loop's timer: it ends after its time, or at once with
/// `CancellationError` when cancelled before or during it, and is resumed exactly once.
@Suite("Waiting on an event loop's timer")
struct EventLoopSleepTests {
    @Test("a wait lasts at least its time, and many at once each end once")
    func waits() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let start = ContinuousClock.now
        try await EventLoopExecutor.sleep(for: 30_000_000, on: loop)
        #expect(ContinuousClock.now - start >= .milliseconds(30))
        let ended = try await withThrowingTaskGroup(of: Int.self) { tasks in
            for index in 0..<500 {
                tasks.addTask(executorPreference: EventLoopExecutor(loop)) {
                    try await EventLoopExecutor.sleep(for: Int64(index % 7) * 1_000_000, on: loop)
                    return 1
                }
            }
            return try await tasks.reduce(0, +)
        }
        #expect(ended == 500)
        try await group.shutdownGracefully()
    }

    /// The wait is an hour long: ending with `CancellationError` inside the test's time limit can
    /// only be the cancellation's doing, however slow the machine (no wall-clock assertion).
    @Test(
        "cancelled before or while waiting, a wait ends with CancellationError, not at its time",
        .timeLimit(.minutes(2))
    )
    func cancelled() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        for delay in [0, 1, 5] as [UInt64] {
            let task = Task(executorPreference: delay == 5 ? EventLoopExecutor(loop) : nil) {
                if delay == 0 { withUnsafeCurrentTask { $0?.cancel() } }
                try await EventLoopExecutor.sleep(for: 3_600_000_000_000, on: loop)
            }
            if delay > 0 { try await Task.sleep(nanoseconds: delay * 1_000_000) }
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
        }
        try await group.shutdownGracefully()
    }
}
