import PushFleetWire

/// What one event loop's timer has measured: a check is the time the timer woke, its thread's
/// CPU time then and, where the kernel says, the time its thread has waited for a core. The
/// timer is due ``LoopLoad/interval`` after the previous check (NIO schedules a repeated task's
/// next run from the end of the last).
struct LoopLoadTally: Sendable {
    let interval: Int64
    let lateThreshold: Int64
    private var first: (wall: Int64, cpu: Int64, wait: Int64?)?
    private var previous: Int64 = 0
    private(set) var load = LoopLoad()

    init(interval: Int64 = LoopLoad.interval, lateThreshold: Int64 = LoopLoad.lateThreshold) {
        self.interval = interval
        self.lateThreshold = lateThreshold
    }

    mutating func check(now: Int64, threadCPU: Int64, threadWait: Int64? = nil) {
        defer { previous = now }
        guard let first else {
            first = (now, threadCPU, threadWait)
            return
        }
        let late = now - (previous + interval)
        load.checks += 1
        if late >= lateThreshold {
            load.lateChecks += 1
            load.lateNanoseconds += late
        }
        load.wallNanoseconds = now - first.wall
        load.cpuNanoseconds = max(load.cpuNanoseconds, threadCPU - first.cpu)
        if let wait = threadWait, let firstWait = first.wait {
            load.waitNanoseconds = max(load.waitNanoseconds ?? 0, wait - firstWait)
        }
    }
}
