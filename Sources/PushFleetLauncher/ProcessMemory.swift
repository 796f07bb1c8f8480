import Foundation

/// A process's memory as the kernel counts it (`/proc/<pid>/status`), read from outside the
/// process or by it of itself: what a user's `top` or `/usr/bin/time` would see.
public enum ProcessMemory {
    /// Resident memory now (VmRSS); nil when it cannot be read (ended, or not Linux).
    public static func resident(_ process: String = "self") -> UInt64? { field("VmRSS:", of: process) }

    /// The highest resident memory so far (VmHWM): the peak at any moment, the ramp included.
    public static func peakResident(_ process: String = "self") -> UInt64? { field("VmHWM:", of: process) }

    private static func field(_ name: String, of process: String) -> UInt64? {
        guard let status = ProcStatus.read("/proc/\(process)/status"), let kb = ProcStatus.number(name, in: status) else { return nil }
        return kb * 1024
    }
}
