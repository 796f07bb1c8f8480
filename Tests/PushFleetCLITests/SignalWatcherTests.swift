import Foundation
import PushFleetLauncher
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The watcher in this process: signals sent to it must reach the handler, never the default action.
@Suite("Signal watcher")
struct SignalWatcherTests {
    @Test("every SIGINT and SIGTERM reaches the handler, a second one too; cancel() restores the default action", .timeLimit(.minutes(3)))
    func signals() async throws {
        let received = Mutex<[String]>([])
        let watcher = SignalWatcher { name in received.withLock { $0.append(name) } }
        // At once, before the watcher's task has run: not lost. (Two sent back to back may be
        // one to the kernel, which keeps one pending signal of a kind.)
        kill(getpid(), SIGINT)
        var expected = ["SIGINT"]
        let first = ContinuousClock.now
        while received.withLock({ $0.count }) < expected.count, ContinuousClock.now - first < .seconds(60) {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(200))
        try #require(received.withLock { $0 } == expected)
        // Each signal once, in order; the repeat is the one that escalates a run.
        for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT"), (SIGINT, "SIGINT")] {
            expected.append(name)
            kill(getpid(), number)
            let sent = ContinuousClock.now
            while received.withLock({ $0.count }) < expected.count, ContinuousClock.now - sent < .seconds(30) {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(received.withLock { $0 } == expected)
        }
        watcher.cancel()
        try await Task.sleep(for: .milliseconds(200))
        // signal() answers the disposition it replaces; setting the default again changes nothing.
        #expect(signal(SIGINT, SIG_DFL) == nil)
        #expect(signal(SIGTERM, SIG_DFL) == nil)
    }
}
