import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
@testable import PushFleetMockPush
import PushFleetTestSupport
import PushFleetWire
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
        #expect(earlier.since(later) == nil)
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
            for _ in 0..<100 where (before.loops ?? []).contains(where: { $0.wallNanoseconds == 0 }) {
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
            }
        }
    }
}
