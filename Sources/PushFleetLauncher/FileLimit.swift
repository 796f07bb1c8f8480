#if canImport(Glibc)
import Glibc
#endif
public import PushFleetCore
import PushFleetEngine
import PushFleetEmbedded

/// The open-files limit: raised as far as the hard limit allows, and checked against what a
/// scenario needs, so a run that cannot fit fails up front with numbers instead of halfway.
public enum FileLimit {
    /// Raises the soft limit to the hard one; returns the limit in force.
    public static func raise() -> (soft: UInt64, hard: UInt64) {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// Descriptors a scenario needs in this process: one per device socket (two when the
    /// embedded push service holds the other end here), the HTTP pools, and headroom.
    public static func needed(_ scenario: Scenario, devices: Int) -> (total: Int, perDevice: Int) {
        var perDevice = 0
        if scenario.fleet.pushChannel == .perDevice && scenario.lifecycle.contains(.connect) {
            perDevice += scenario.target == .embedded ? 2 : 1
        }
        if scenario.fleet.http == .perDevice { perDevice += scenario.target == .embedded ? 2 : 1 }
        let fixed = 256 + scenario.fleet.connections * (scenario.target == .embedded ? 2 : 1) + 64
        return (fixed + perDevice * devices, perDevice)
    }

    /// A message when this machine cannot play the scenario, nil when it can: too few open files
    /// for its sockets, or, against the embedded push service, more devices with a socket of
    /// their own than the service takes, or network faults without the kernel's packet filter.
    public static func problem(_ scenario: Scenario, devices: Int) -> String? {
        openFilesProblem(scenario, devices: devices)
            ?? deviceCapProblem(scenario, devices: devices, cap: EmbeddedSystem.defaultDeviceCap(), limit: raise().soft)
            ?? (scenario.network.needsKernel ? NFTables.unavailable() : nil)
    }

    /// Devices on sockets of their own past the embedded push service's device cap, which would
    /// be refused (503) at connect.
    public static func deviceCapProblem(_ scenario: Scenario, devices: Int, cap: Int, limit: UInt64) -> String? {
        guard scenario.target == .embedded, scenario.fleet.pushChannel == .perDevice, scenario.lifecycle.contains(.connect),
            devices > cap
        else { return nil }
        return """
            this scenario's \(devices.grouped) devices each open a socket to the embedded push service, which takes at most \
            \(cap.grouped) device sockets (its share of the open-files limit of \(limit.grouped), less a reserve kept for the \
            backend's pushes): \((devices - cap).grouped) devices would be refused at connect (connect:at_capacity). Use \
            push_channel: multiplexed, run the servers in another process (pushfleet serve; target: {backend, pns}), shard the \
            fleet, or raise the open-files limit (see docs/performance.md).
            """
    }

    /// Too few open files for the scenario's sockets.
    private static func openFilesProblem(_ scenario: Scenario, devices: Int) -> String? {
        let limit = raise()
        let need = needed(scenario, devices: devices)
        guard UInt64(need.total) > limit.soft, need.perDevice > 0 else { return nil }
        let fit = max(0, (Int(limit.soft) - (need.total - need.perDevice * devices)) / need.perDevice)
        return """
            this scenario needs about \(need.total) open files (\(need.perDevice) per device) but the limit is \(limit.soft) \
            (hard limit \(limit.hard), which this process cannot raise). At most \(fit) devices fit. Use push_channel: multiplexed, \
            run the servers in another process (target: {backend, pns}), shard the fleet, or raise the hard limit (see docs/performance.md).
            """
    }
}
