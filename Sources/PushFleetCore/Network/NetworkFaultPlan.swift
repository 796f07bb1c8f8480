/// What a run's network faults do, decided before it starts: which devices each fault touches,
/// the address each device's socket binds to, when the set of faults in force changes, and the
/// nftables rules for each set (docs/network-faults.md). Pure: the engine applies its scripts.
///
/// Every device with its own socket binds `127.B.x.y`, one address per device and used for
/// nothing but its phone link, so a rule picks devices, and so the link, by address. `B` comes
/// from the run id, so every shard of a run numbers its devices alike and one shard's rules
/// cover them all.
public struct NetworkFaultPlan: Sendable {
    public let faults: [Scenario.NetworkFault]
    /// The nftables table the run owns (`inet`): `pushfleet_<pid>_<n>`, swept once its process is gone.
    public let table: String
    /// The second octet of the devices' addresses.
    public let base: UInt8
    /// Device indices each fault touches, ascending.
    public let members: [[Int]]

    /// Devices a plan can number: one /16 of loopback addresses.
    public static let maxDevices = 65_534
    public static let tablePrefix = "pushfleet_"

    public init(faults: [Scenario.NetworkFault], devices: Int, seed: UInt64, runID: String, pid: Int32, instance: Int = 0) {
        self.faults = faults
        self.table = Self.tablePrefix + "\(pid)_\(instance)"
        self.base = Self.base(runID: runID)
        // One draw per device for every fault: a fault takes the devices whose draw is below its
        // share, so shares nest, and faults of the same share touch the same devices (a lossy
        // and slow link is two faults of one share).
        let draws = (0..<devices).map { device in
            var draw = SplitMix64(seed: seed ^ 0x4E37_0F1E ^ (UInt64(device) &* 0xD1B5_4A32_D192_ED03))
            return draw.nextUnit()
        }
        members = faults.map { fault in
            fault.share >= 1 ? Array(0..<devices) : draws.indices.filter { draws[$0] < fault.share }
        }
    }

    static func base(runID: String) -> UInt8 {
        // 100–227: clear of 127.0.0.x, where the system's own servers and spread sockets live.
        UInt8(100 + stableHash(runID) % 128)
    }

    /// The address device `index` binds its own sockets to.
    public func address(of device: Int) -> String {
        let host = device + 1
        return "127.\(base).\(host >> 8 & 0xFF).\(host & 0xFF)"
    }

    /// The device an address of this plan names, if any.
    public func device(at address: String) -> Int? {
        let parts = address.split(separator: ".").compactMap { Int($0) }
        guard parts.count == 4, parts[0] == 127, parts[1] == Int(base) else { return nil }
        let host = parts[2] << 8 | parts[3]
        return host >= 1 && host <= Self.maxDevices ? host - 1 : nil
    }

    /// One span of time, from the start of traffic, in which a fault is in force.
    public struct Phase: Sendable, Equatable {
        public var fault: Int
        public var start: Duration
        public var end: Duration
    }

    /// Every down phase of every fault, by start.
    public var phases: [Phase] {
        var phases: [Phase] = []
        for (index, fault) in faults.enumerated() {
            let end = fault.at + fault.duration
            guard let flap = fault.flap else {
                phases.append(Phase(fault: index, start: fault.at, end: end))
                continue
            }
            var start = fault.at
            while start < end {
                phases.append(Phase(fault: index, start: start, end: min(start + flap.down, end)))
                start += flap.down + flap.up
            }
        }
        return phases.sorted { ($0.start, $0.fault) < ($1.start, $1.fault) }
    }

    /// A moment at which the faults in force change.
    public struct Change: Sendable, Equatable {
        public var at: Duration
        /// Faults in force from then on, by index.
        public var active: [Int]
        public var began: [Int]
        public var ended: [Int]
    }

    /// The changes in time order; the last leaves nothing in force.
    public var changes: [Change] {
        let phases = self.phases
        let instants = Set(phases.flatMap { [$0.start, $0.end] }).sorted()
        var changes: [Change] = []
        var previous: Set<Int> = []
        for instant in instants {
            let active = Set(phases.filter { $0.start <= instant && instant < $0.end }.map(\.fault))
            guard active != previous else { continue }
            changes.append(Change(at: instant, active: active.sorted(), began: active.subtracting(previous).sorted(), ended: previous.subtracting(active).sorted()))
            previous = active
        }
        return changes
    }

    /// When the partition that cut `device` off at `offset` (from the start of traffic) began:
    /// the latest down phase of a partition touching it that began by then and ended at most
    /// `slack` before it. Nil when no partition accounts for the device losing its link.
    public func partitionStart(device: Int, at offset: Duration, slack: Duration) -> Duration? {
        phases.last { phase in
            guard case .partition = faults[phase.fault].kind, phase.start <= offset, offset <= phase.end + slack else { return false }
            return members[phase.fault].binarySearchContains(device)
        }?.start
    }

    /// The hold-back for a chunk of `device`'s link: the sum of the latency faults in `active`
    /// that touch it, each drawn within its jitter (ns).
    public func delay(device: Int, active: [Int], draw: inout SplitMix64) -> Int64 {
        var total: Int64 = 0
        for index in active {
            guard case .latency(let delay, let jitter) = faults[index].kind, members[index].binarySearchContains(device) else { continue }
            let spread = jitter > .zero ? Int64((draw.nextUnit() * 2 - 1) * Double(jitter.nanoseconds)) : 0
            total += max(0, delay.nanoseconds + spread)
        }
        return total
    }

    // MARK: nftables

    /// Creates the table, a set of addresses per fault and an empty output chain. Starts with
    /// the table's removal, so a table left by a process that reused this pid goes too.
    public var installScript: String {
        var lines = ["table inet \(table) {}", "delete table inet \(table)", "table inet \(table) {"]
        for (index, members) in members.enumerated() {
            lines.append("  set f\(index) {")
            lines.append("    type ipv4_addr")
            if !members.isEmpty {
                let addresses = members.map(address(of:))
                lines.append("    elements = { " + addresses.joined(separator: ", ") + " }")
            }
            lines.append("  }")
        }
        lines.append("  chain links {")
        // Loopback traffic passes output once per packet: dropping there loses it for both ends.
        lines.append("    type filter hook output priority filter; policy accept;")
        lines.append("  }")
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    /// Replaces the chain's rules with those of the faults in `active`, in one transaction.
    public func applyScript(active: [Int]) -> String {
        var lines = ["flush chain inet \(table) links"]
        for index in active {
            for rule in rules(index) { lines.append("add rule inet \(table) links \(rule)") }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    public var removeScript: String { "delete table inet \(table)\n" }

    /// The rules one fault adds: the device's packets match `saddr`, those to it `daddr`. Its
    /// address carries its phone link only, so no port is named (a shard's proxy has its own).
    public func rules(_ index: Int) -> [String] {
        let fromDevice = "ip saddr @f\(index) meta l4proto tcp"
        let toDevice = "ip daddr @f\(index) meta l4proto tcp"
        switch faults[index].kind {
        case .latency: return []
        case .loss(let ratio):
            let threshold = Int((ratio * 10_000).rounded())
            return [fromDevice, toDevice].map { "\($0) numgen random mod 10000 < \(threshold) counter drop" }
        case .partition(.both): return [fromDevice + " counter drop", toDevice + " counter drop"]
        case .partition(.toDevice): return [toDevice + " counter drop"]
        case .partition(.fromDevice): return [fromDevice + " counter drop"]
        }
    }

    /// The pid in a table name of this prefix, for sweeping tables whose process is gone.
    public static func pid(ofTable name: String) -> Int32? {
        guard name.hasPrefix(tablePrefix) else { return nil }
        return name.dropFirst(tablePrefix.count).split(separator: "_").first.flatMap { Int32($0) }
    }
}

extension Array where Element == Int {
    /// Membership in an ascending array.
    func binarySearchContains(_ value: Int) -> Bool {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle] < value { low = middle + 1 } else if self[middle] > value { high = middle } else { return true }
        }
        return false
    }
}
