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
        // Until the sequence has registered, a signal is ignored: send until one arrives (a bound
        // that only catches a hang: a loaded machine starts the watcher's task late).
        let deadline = ContinuousClock.now + .seconds(60)
        while received.withLock({ $0.isEmpty }), ContinuousClock.now < deadline {
            kill(getpid(), SIGINT)
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .milliseconds(200))
        var expected = received.withLock { $0 }
        try #require(!expected.isEmpty && expected.allSatisfy { $0 == "SIGINT" })
        // Registered now: each signal once, in order; the repeat is the one that escalates a run.
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
