import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
@testable import PushFleetMockPush
import PushFleetTestSupport
import PushFleetWire
import Synchronization
import Testing

/// The push service measuring its own event loops: a timer per loop, its thread's CPU time and
/// how late it woke, totals in `/admin/stats`.
@Suite("Event loop load")
struct LoopLoadTests {
    static let ms: Int64 = 1_000_000

    @Test("checks on time are not late; a check 250 ms late is, by 250 ms; CPU counts from the first check")
    func tally() {
        var tally = LoopLoadTally(interval: 100 * Self.ms, lateThreshold: 100 * Self.ms)
        tally.check(now: 1_000 * Self.ms, threadCPU: 40 * Self.ms)
        #expect(tally.load == LoopLoad())
        tally.check(now: 1_100 * Self.ms, threadCPU: 90 * Self.ms)
        tally.check(now: 1_299 * Self.ms, threadCPU: 140 * Self.ms)
        #expect(tally.load.checks == 2 && tally.load.lateChecks == 0)
        tally.check(now: 1_649 * Self.ms, threadCPU: 400 * Self.ms)
        #expect(tally.load.checks == 3 && tally.load.lateChecks == 1 && tally.load.lateNanoseconds == 250 * Self.ms)
        #expect(tally.load.wallNanoseconds == 649 * Self.ms && tally.load.cpuNanoseconds == 360 * Self.ms)
    }

    @Test("the time a loop's thread waited for a core counts from the first check, as its CPU does; a kernel that does not say gives none")
    func tallyWait() {
        var tally = LoopLoadTally(interval: 100 * Self.ms, lateThreshold: 100 * Self.ms)
        tally.check(now: 1_000 * Self.ms, threadCPU: 40 * Self.ms, threadWait: 500 * Self.ms)
        tally.check(now: 1_100 * Self.ms, threadCPU: 80 * Self.ms, threadWait: 560 * Self.ms)
        #expect(tally.load.waitNanoseconds == 60 * Self.ms && tally.load.cpuNanoseconds == 40 * Self.ms)
        var blind = LoopLoadTally()
        blind.check(now: 1_000 * Self.ms, threadCPU: 0)
        blind.check(now: 1_100 * Self.ms, threadCPU: 10 * Self.ms)
        #expect(blind.load.waitNanoseconds == nil)
    }

    @Test("schedstat's second number is the run-queue wait; anything but three unsigned decimals within Int64 is none")
    func schedStat() {
        #expect(SchedStat.wait(Array("4123456 789 12\n".utf8)) == 789)
        #expect(SchedStat.wait(Array("0 0 0".utf8)) == 0)
        for text in ["", "1 2", "1 2 3 4", "1 -2 3", "1 2x 3", "1 99999999999999999999 3", "1\t2\t3"] {
            #expect(SchedStat.wait(Array(text.utf8)) == nil, "\(text)")
        }
    }

    /// Three spinning threads a core take turns with the loop's thread: it runs about a quarter
    /// of the time it wants a core, and waits the rest. Other load only adds to the wait.
    @Test("a loop thread that wants a core while other threads take it says how long it waited: at least half its CPU time")
    func starvedThread() async throws {
        final class Flag: Sendable { let stop = Atomic<Bool>(false) }
        let flag = Flag()
        for _ in 0..<(3 * System.coreCount) {
            Thread { while !flag.stop.load(ordering: .relaxed) {} }.start()
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let measured = try await group.next().submit { () -> (cpu: Int64, wait: Int64?) in
            let wait = LoopLoadMonitor.threadWait()
            let cpu = LoopLoadMonitor.threadCPU()
            while LoopLoadMonitor.threadCPU() < cpu + 200 * Self.ms {}
            let spent = LoopLoadMonitor.threadCPU() - cpu
            guard let wait, let waited = LoopLoadMonitor.threadWait() else { return (spent, nil) }
            return (spent, waited - wait)
        }.get()
        flag.stop.store(true, ordering: .relaxed)
        try await group.shutdownGracefully()
        let wait = try #require(measured.wait, "no /proc/thread-self/schedstat")
        #expect(wait >= measured.cpu / 2, "waited \(wait / Self.ms) ms while running \(measured.cpu / Self.ms) ms")
    }

    @Test("a reading less an earlier one is the span between; a reading from before a restart is not earlier")
    func since() throws {
        var earlier = LoopLoad()
        earlier.wallNanoseconds = 1_000
        earlier.cpuNanoseconds = 300
        earlier.checks = 10
        var later = earlier
        later.wallNanoseconds = 3_000
        later.cpuNanoseconds = 2_100
        later.checks = 30
        later.lateChecks = 2
        later.lateNanoseconds = 500
        let span = try #require(later.since(earlier))
        #expect(span.wallNanoseconds == 2_000 && span.cpuNanoseconds == 1_800 && span.checks == 20 && span.lateChecks == 2)
        #expect(span.waitNanoseconds == nil)
        #expect(earlier.since(later) == nil)
        earlier.waitNanoseconds = 100
        later.waitNanoseconds = 700
        #expect(later.since(earlier)?.waitNanoseconds == 600)
        later.waitNanoseconds = 50
        #expect(later.since(earlier) == nil, "a wait that went back is another thread's")
    }

    @Test("a process's share of its cores between two readings; none from another process or with no time between")
    func processShare() {
        let before = ProcessLoad(cpuNanoseconds: 1_000, wallNanoseconds: 10_000, cores: 2)
        #expect(ProcessLoad(cpuNanoseconds: 19_000, wallNanoseconds: 20_000, cores: 2).coreShare(since: before) == 0.9)
        #expect(ProcessLoad(cpuNanoseconds: 19_000, wallNanoseconds: 20_000, cores: 1).coreShare(since: before) == nil)
        #expect(ProcessLoad(cpuNanoseconds: 500, wallNanoseconds: 20_000, cores: 2).coreShare(since: before) == nil)
        #expect(before.coreShare(since: before) == nil)
    }

    @Test("a push service whose loops are held busy says so in /admin/stats: every loop, its CPU and its late checks")
    func busyLoops() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            let auth = TestAuth.bearer(try #require(system.adminToken))
            let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())
            // Wait for every loop's first check: the tally counts from it.
            var before = try await TestHTTP.request(.GET, "\(system.pushService)/admin/stats", auth: auth).json(PushServiceStats.self)
            let deadline = ContinuousClock.now + .seconds(120)
            while (before.loops ?? []).contains(where: { $0.wallNanoseconds == 0 }), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                before = try await TestHTTP.request(.GET, "\(system.pushService)/admin/stats", auth: auth).json(PushServiceStats.self)
            }
            let first = try #require(before.loops)
            #expect(first.count == loops.count)
            let process = try #require(before.process)
            #expect(process.cores >= 1 && process.cpuNanoseconds > 0 && process.wallNanoseconds > 0, "\(process)")
            // Each loop spins for 400 ms of its thread's CPU (a loaded machine may take longer):
            // its timer, due every 100 ms, wakes at least 300 ms late.
            for loop in loops {
                try await loop.submit {
                    let end = LoopLoadMonitor.threadCPU() + 400 * Self.ms
                    while LoopLoadMonitor.threadCPU() < end {}
                }.get()
            }
            try await Task.sleep(for: .milliseconds(300))
            let after = try #require(try await TestHTTP.request(.GET, "\(system.pushService)/admin/stats", auth: auth).json(PushServiceStats.self).loops)
            for (now, then) in zip(after, first) {
                let span = try #require(now.since(then))
                #expect(span.lateChecks >= 1 && span.lateNanoseconds >= 250 * Self.ms, "\(span)")
                #expect(span.cpuNanoseconds >= 350 * Self.ms, "\(span)")
                #expect(span.waitNanoseconds != nil, "Linux says how long a thread waited for a core")
            }
        }
    }
}
