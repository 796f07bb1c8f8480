import Foundation

/// CPU seconds (user + system) from getrusage.
public enum CPUTime {
    public static func own() -> Double { usage(RUSAGE_SELF) }
    /// Of children that have exited and been waited for.
    public static func children() -> Double { usage(RUSAGE_CHILDREN) }

    private static func usage(_ who: __rusage_who) -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(who.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
