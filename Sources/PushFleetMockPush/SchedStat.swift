/// The kernel's per-thread scheduler figures (`/proc/thread-self/schedstat`): three decimal
/// numbers, the time on a CPU (ns), the time waiting on a run queue (ns) and the time slices run.
enum SchedStat {
    /// The second number; nil unless the text is three unsigned decimals that fit in Int64.
    static func wait<Bytes: Collection<UInt8>>(_ text: Bytes) -> Int64? {
        var fields = 0
        var wait: Int64 = 0
        var value: Int64 = 0
        var digits = 0
        for byte in text {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflowSum) = times.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                guard !overflowTimes, !overflowSum else { return nil }
                value = sum
                digits += 1
            case UInt8(ascii: " "), UInt8(ascii: "\n"):
                guard digits > 0 else { continue }
                fields += 1
                if fields == 2 { wait = value }
                value = 0
                digits = 0
            default:
                return nil
            }
        }
        if digits > 0 { fields += 1 }
        return fields == 3 ? wait : nil
    }
}
