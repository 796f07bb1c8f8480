import Foundation

/// How often a process's threads left their core (`/proc/<pid>/task/*/status`): woken from a
/// sleep (`voluntary_ctxt_switches`: a wait for a socket, a timer or a lock) and preempted
/// (`nonvoluntary_ctxt_switches`). A server paced at one push per wake-up pays each of its
/// wake-ups in the kernel, and on this project's machines (virtual ones, whose idle cores halt)
/// a wake-up costs as much as a request's handling; the counts are exact where CPU time swings.
public struct ContextSwitches: Sendable, Equatable {
    public var woken: UInt64
    public var preempted: UInt64

    public init(woken: UInt64 = 0, preempted: UInt64 = 0) {
        self.woken = woken
        self.preempted = preempted
    }

    /// The sum over the process's threads alive now; nil when the process cannot be read. A
    /// thread that ended takes its counts with it, so a window's difference is a floor.
    public static func of(_ process: String = "self") -> ContextSwitches? {
        let directory = "/proc/\(process)/task"
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return nil }
        var total = ContextSwitches()
        for thread in threads {
            guard let status = ProcStatus.read("\(directory)/\(thread)/status") else { continue }
            total.woken += ProcStatus.number("voluntary_ctxt_switches:", in: status) ?? 0
            total.preempted += ProcStatus.number("nonvoluntary_ctxt_switches:", in: status) ?? 0
        }
        return total
    }

    /// This window's switches: `self` less an earlier reading, never below zero (threads end).
    public func since(_ earlier: ContextSwitches) -> ContextSwitches {
        ContextSwitches(
            woken: woken >= earlier.woken ? woken - earlier.woken : 0,
            preempted: preempted >= earlier.preempted ? preempted - earlier.preempted : 0
        )
    }
}
