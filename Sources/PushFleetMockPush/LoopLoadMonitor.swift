import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PushFleetWire
import ServiceLifecycle

/// Runs a timer on every loop of the servers' event loop group while it runs as a service, so
/// that `/admin/stats` can say how busy and how late each loop was: a push service that cannot
/// keep up makes whoever sends to it look slow, and the run has to know it was pushfleet.
final class LoopLoadMonitor: Service, Sendable {
    private let loops: [any EventLoop]
    private let tallies: [NIOLockedValueBox<LoopLoadTally>]

    init(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        var loops: [any EventLoop] = []
        for loop in group.makeIterator() { loops.append(loop) }
        self.loops = loops
        self.tallies = loops.map { _ in NIOLockedValueBox(LoopLoadTally()) }
    }

    var snapshot: [LoopLoad] { tallies.map { $0.withLockedValue(\.load) } }

    func run() async throws {
        let interval = TimeAmount.nanoseconds(LoopLoad.interval)
        let timers = zip(loops, tallies).map { loop, tally in
            loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
                let now = Int64(truncatingIfNeeded: NIODeadline.now().uptimeNanoseconds)
                tally.withLockedValue { $0.check(now: now, threadCPU: Self.threadCPU()) }
            }
        }
        try? await gracefulShutdown()
        for timer in timers { timer.cancel() }
    }

    /// CPU time of the calling thread (ns).
    static func threadCPU() -> Int64 {
        var time = timespec()
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 else { return 0 }
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
