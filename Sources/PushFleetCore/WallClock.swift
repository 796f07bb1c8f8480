#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wall-clock time in nanoseconds since the Unix epoch: the time base of timestamps that cross
/// process boundaries (a push's accept time, a send's start in a report).
public enum WallClock {
    public static func nanoseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}

/// A monotonic clock in nanoseconds (unaffected by wall-clock steps), for expiries and intervals
/// inside one process.
public enum MonotonicClock {
    public static func nanoseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}
