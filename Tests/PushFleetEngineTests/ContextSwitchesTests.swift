import Foundation
@testable import PushFleetLauncher
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

    @Test("a status line is read by its exact name; a missing, empty or garbled number is nil")
    func statusLines() {
        let status = "Name:\tpushfleet\nVmRSS:\t    5660 kB\nvoluntary_ctxt_switches:\t123\nnonvoluntary_ctxt_switches:\t7\nVmHWM:\t\nVmSwap:\t-4 kB\nVmPeak:\t12x kB\n"
        #expect(ProcStatus.number("VmRSS:", in: status) == 5660)
        #expect(ProcStatus.number("voluntary_ctxt_switches:", in: status) == 123)
        #expect(ProcStatus.number("nonvoluntary_ctxt_switches:", in: status) == 7)
        #expect(ProcStatus.number("VmHWM:", in: status) == nil)
        #expect(ProcStatus.number("VmSwap:", in: status) == nil)
        #expect(ProcStatus.number("VmPeak:", in: status) == nil)
        #expect(ProcStatus.number("VmData:", in: status) == nil)
        #expect(ProcStatus.number("VmRSS:", in: "") == nil)
        #expect(ProcStatus.number("VmRSS:", in: "VmRSS:\t99999999999999999999999 kB") == nil)
    }
}
