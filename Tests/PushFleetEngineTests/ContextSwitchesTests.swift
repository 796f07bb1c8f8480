import Foundation
import PushFleetLauncher
import Testing

/// The wake-ups `bench delivery` prints per push, read from /proc.
@Suite("Context switches")
struct ContextSwitchesTests {
    @Test("a thread that sleeps is counted as woken, once a sleep, in its process's sum")
    func sleepsAreWakeUps() throws {
        let before = try #require(ContextSwitches.of())
        let slept = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        // The thread stays alive until read: an ended thread takes its counts with it.
        let thread = Thread {
            for _ in 0..<20 { usleep(2_000) }
            slept.signal()
            release.wait()
        }
        thread.start()
        slept.wait()
        let after = try #require(ContextSwitches.of())
        release.signal()
        #expect(after.since(before).woken >= 20)
    }

    @Test("another process is read by its id; one that does not exist is nil")
    func otherProcesses() throws {
        let own = try #require(ContextSwitches.of(String(getpid())))
        #expect(own.woken + own.preempted > 0)
        #expect(ContextSwitches.of("999999999") == nil)
        #expect(ContextSwitches.of("not-a-pid") == nil)
    }

    @Test("a window never goes below zero when a thread ended inside it")
    func windowFloor() {
        let earlier = ContextSwitches(woken: 50, preempted: 7)
        let later = ContextSwitches(woken: 40, preempted: 9)
        #expect(later.since(earlier) == ContextSwitches(woken: 0, preempted: 2))
    }
}
