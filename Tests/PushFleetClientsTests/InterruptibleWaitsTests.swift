import NIOCore
import NIOPosix
import Synchronization
import Testing

import PushFleetClients

/// A sender's pacing waits, which a stop request interrupts without cancelling the sender's task
/// (its requests in flight are its children and must finish).
@Suite("Interruptible waits on an event loop's timer")
struct InterruptibleWaitsTests {
    @Test("an uninterrupted wait lasts its time and says so")
    func plainWait() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let waits = InterruptibleWaits()
        let start = ContinuousClock.now
        #expect(await waits.sleep(for: 20_000_000, on: group.next()))
        #expect(ContinuousClock.now - start >= .milliseconds(20))
        try await group.shutdownGracefully()
    }

    /// The waits are an hour long: ending inside the test's time limit can only be the
    /// interruption's doing, however slow the machine (no wall-clock assertion).
    @Test("an interruption ends the wait under way and every later one, and cancels nothing", .timeLimit(.minutes(2)))
    func interrupted() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let waits = InterruptibleWaits()
        let began = Mutex(false)
        let waiter = Task(executorPreference: EventLoopExecutor(loop)) {
            began.withLock { $0 = true }
            let ended = await waits.sleep(for: 3_600_000_000_000, on: loop)
            return (ended, Task.isCancelled)
        }
        while !began.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(1)) }
        try await Task.sleep(for: .milliseconds(20))
        waits.interrupt()
        let (ended, cancelled) = await waiter.value
        #expect(!ended && !cancelled)
        #expect(waits.isInterrupted)
        #expect(await !waits.sleep(for: 3_600_000_000_000, on: loop), "a wait after the interruption does not begin")
        try await group.shutdownGracefully()
    }

    @Test("a cancelled task's wait ends too", .timeLimit(.minutes(2)))
    func cancelled() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let waits = InterruptibleWaits()
        let waiter = Task { await waits.sleep(for: 3_600_000_000_000, on: loop) }
        try await Task.sleep(for: .milliseconds(20))
        waiter.cancel()
        #expect(await !waiter.value)
        #expect(!waits.isInterrupted)
        try await group.shutdownGracefully()
    }
}
