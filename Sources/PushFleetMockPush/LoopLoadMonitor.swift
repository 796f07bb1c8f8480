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
    private let started = NIODeadline.now()
    private let cores = LoopLoadMonitor.usableCores()

    init(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        var loops: [any EventLoop] = []
        for loop in group.makeIterator() { loops.append(loop) }
        self.loops = loops
        self.tallies = loops.map { _ in NIOLockedValueBox(LoopLoadTally()) }
    }

    var snapshot: [LoopLoad] { tallies.map { $0.withLockedValue(\.load) } }

    /// The whole process: every thread's CPU (the servers' Swift tasks run off the loops).
    var process: ProcessLoad {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        let cpu = (Int64(usage.ru_utime.tv_sec) + Int64(usage.ru_stime.tv_sec)) * 1_000_000_000
            + (Int64(usage.ru_utime.tv_usec) + Int64(usage.ru_stime.tv_usec)) * 1_000
        let wall = Int64(truncatingIfNeeded: NIODeadline.now().uptimeNanoseconds - started.uptimeNanoseconds)
        return ProcessLoad(cpuNanoseconds: cpu, wallNanoseconds: wall, cores: cores)
    }

    func run() async throws {
        let interval = TimeAmount.nanoseconds(LoopLoad.interval)
        let timers = zip(loops, tallies).map { loop, tally in
            loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
                let now = Int64(truncatingIfNeeded: NIODeadline.now().uptimeNanoseconds)
                let cpu = Self.threadCPU()
                let wait = Self.threadWait()
                tally.withLockedValue { $0.check(now: now, threadCPU: cpu, threadWait: wait) }
            }
        }
        try? await gracefulShutdown()
        for timer in timers { timer.cancel() }
    }

    /// The cores this process may run on: its CPU affinity (`taskset`; `Cpus_allowed` in
    /// /proc/self/status, as Swift's Glibc does not offer sched_getaffinity), within NIO's count
    /// (which reads a cgroup's CPU quota).
    static func usableCores() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed:") }) else { return System.coreCount }
        let mask = line.dropFirst("Cpus_allowed:".count).filter { $0.isHexDigit }
        let allowed = mask.reduce(0) { $0 + ($1.hexDigitValue ?? 0).nonzeroBitCount }
        return allowed > 0 ? min(allowed, System.coreCount) : System.coreCount
    }

    /// How long the calling thread has waited, ready to run, for a core (ns): the second field
    /// of `/proc/thread-self/schedstat`, which counts a CPU quota's throttling too. nil where
    /// the kernel does not keep it.
    static func threadWait() -> Int64? {
        let fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 96) { buffer in
            let count = read(fd, buffer.baseAddress, buffer.count)
            guard count > 0 else { return nil }
            return SchedStat.wait(UnsafeBufferPointer(rebasing: buffer[..<count]))
        }
    }

    /// CPU time of the calling thread (ns).
    static func threadCPU() -> Int64 {
        // A timespec is two 64-bit words here (seconds, nanoseconds).
        withUnsafeTemporaryAllocation(of: Int64.self, capacity: 2) { words in
            let done = words.baseAddress!.withMemoryRebound(to: timespec.self, capacity: 1) { clock_gettime(CLOCK_THREAD_CPUTIME_ID, $0) }
            return done == 0 ? words[0] * 1_000_000_000 + words[1] : 0
        }
    }
}
