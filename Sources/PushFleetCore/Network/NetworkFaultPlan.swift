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
    /// Where the links other than the phone's end.
    public let endpoints: Endpoints

    /// The run's servers, as the rules of the `backend_push` and `fleet_backend` links match
    /// them: IPv4 addresses and ports.
    public struct Endpoints: Sendable, Equatable {
        /// The push service's address and every port it listens on (plain, h2c, TLS).
        public var pushServiceHost: String
        public var pushServicePorts: [Int]
        public var backendHost: String
        public var backendPort: Int

        public init(pushServiceHost: String = "127.0.0.1", pushServicePorts: [Int] = [], backendHost: String = "127.0.0.1", backendPort: Int = 0) {
            self.pushServiceHost = pushServiceHost
            self.pushServicePorts = pushServicePorts
            self.backendHost = backendHost
            self.backendPort = backendPort
        }
    }

    /// Devices a plan can number: one /16 of loopback addresses.
    public static let maxDevices = 65_534
    public static let tablePrefix = "pushfleet_"

    public init(
        faults: [Scenario.NetworkFault], devices: Int, seed: UInt64, runID: String, pid: Int32, instance: Int = 0, endpoints: Endpoints = Endpoints()
    ) {
        self.faults = faults
        self.endpoints = endpoints
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
            fault.share >= 1 || fault.link != .phone ? Array(0..<devices) : draws.indices.filter { draws[$0] < fault.share }
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

    /// Whether fault `index` touches `device`.
    public func touches(_ index: Int, device: Int) -> Bool { members[index].binarySearchContains(device) }

    /// The address pushfleet's own sockets on the push service's port bind to when they are not
    /// a device's (the phone proxy's side to the gateway): in the run's /16, so the
    /// `backend_push` rules pass them, and in no fault's set.
    public var fleetAddress: String { "127.\(base).255.255" }

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
        partitionPhase(device: device, at: offset, slack: slack)?.start
    }

    /// The phone partition's down phase that accounts for `device` losing its link at `offset`.
    public func partitionPhase(device: Int, at offset: Duration, slack: Duration) -> Phase? {
        phases.last { phase in
            guard faults[phase.fault].link == .phone, case .partition = faults[phase.fault].kind, phase.start <= offset, offset <= phase.end + slack else { return false }
            return members[phase.fault].binarySearchContains(device)
        }
    }

    /// What the run's proxy does to one device's link while some faults are in force
    /// (Toxiproxy's toxics are the model).
    public struct LinkToxics: Sendable, Equatable {
        /// Each chunk held back this long (ns), drawn within the latency faults' jitter.
        public var delay: Int64 = 0
        /// The slowest bandwidth in force, bytes a second per direction.
        public var bytesPerSecond: Int?
        /// Chunks passed on in pieces of `size` bytes, `gap` ns apart (the smallest in force).
        public var slice: (size: Int, gap: Int64)?
        /// A close reaches the other end this much later (ns).
        public var slowClose: Int64 = 0
        /// A timeout is in force: nothing passes.
        public var blackhole = false

        public init() {}

        public static func == (a: Self, b: Self) -> Bool {
            a.delay == b.delay && a.bytesPerSecond == b.bytesPerSecond && a.slice?.size == b.slice?.size && a.slice?.gap == b.slice?.gap
                && a.slowClose == b.slowClose && a.blackhole == b.blackhole
        }
    }

    /// The toxics for a chunk of `device`'s link: those of the faults in `active` that touch it.
    public func toxics(device: Int, active: [Int], draw: inout SplitMix64) -> LinkToxics {
        var toxics = LinkToxics()
        for index in active where faults[index].link == .phone && members[index].binarySearchContains(device) {
            switch faults[index].kind {
            case .latency(let delay, let jitter):
                let spread = jitter > .zero ? Int64((draw.nextUnit() * 2 - 1) * Double(jitter.nanoseconds)) : 0
                toxics.delay += max(0, delay.nanoseconds + spread)
            case .bandwidth(let rate): toxics.bytesPerSecond = min(toxics.bytesPerSecond ?? rate, rate)
            case .slicer(let size, let gap):
                if toxics.slice.map({ size < $0.size }) ?? true { toxics.slice = (size, gap.nanoseconds) }
            case .slowClose(let delay): toxics.slowClose = max(toxics.slowClose, delay.nanoseconds)
            case .timeout: toxics.blackhole = true
            case .loss, .partition, .resetPeer: break
            }
        }
        return toxics
    }

    /// The hold-back for a chunk of `device`'s link: the sum of the latency faults in `active`
    /// that touch it, each drawn within its jitter (ns).
    public func delay(device: Int, active: [Int], draw: inout SplitMix64) -> Int64 {
        toxics(device: device, active: active, draw: &draw).delay
    }

    /// How a fault ends the connections it touches: closed (`timeout`) or reset (`reset_peer`)
    /// this long after it begins, or after they open while it is in force. Nil for other faults,
    /// and for a timeout that never closes.
    public func cut(_ index: Int) -> (after: Duration, reset: Bool)? {
        switch faults[index].kind {
        case .timeout(let after): after > .zero ? (after, false) : nil
        case .resetPeer(let after): (after, true)
        default: nil
        }
    }

    // MARK: nftables

    /// Creates the table, a set of addresses per fault and two empty chains. Starts with the
    /// table's removal, so a table left by a process that reused this pid goes too.
    public var installScript: String {
        var lines = ["table inet \(table) {}", "delete table inet \(table)", "table inet \(table) {"]
        for (index, members) in members.enumerated() where faults[index].link == .phone {
            lines.append("  set f\(index) {")
            lines.append("    type ipv4_addr")
            if !members.isEmpty {
                let addresses = members.map(address(of:))
                lines.append("    elements = { " + addresses.joined(separator: ", ") + " }")
            }
            lines.append("  }")
        }
        // Every packet a process on this machine sends passes output once, and every packet it
        // receives passes input once, loopback or not: each direction is dropped at one hook.
        lines.append("  chain links {")
        lines.append("    type filter hook output priority filter; policy accept;")
        lines.append("  }")
        lines.append("  chain inbound {")
        lines.append("    type filter hook input priority filter; policy accept;")
        lines.append("  }")
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    /// Replaces the chains' rules with those of the faults in `active`, in one transaction.
    public func applyScript(active: [Int]) -> String {
        var lines = ["flush chain inet \(table) links", "flush chain inet \(table) inbound"]
        for index in active {
            for rule in rules(index) { lines.append("add rule inet \(table) \(rule.chain.rawValue) \(rule.match)") }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    public var removeScript: String { "delete table inet \(table)\n" }

    /// The hook a rule sits at: `links` (output) for packets a local process sends, `inbound`
    /// (input) for packets it receives.
    public enum Chain: String, Sendable {
        case links, inbound
    }

    /// The rules one fault adds, each one direction of its link.
    ///
    /// - `phone`: a device's packets match `saddr` of its set, those to it `daddr`; its address
    ///   carries its phone link only, so no port is named (a shard's proxy has its own).
    /// - `backend_push`: packets to the push service's ports, and from them, whose other end is
    ///   not one of the run's own addresses (devices, the proxy): the backend's, wherever it runs.
    /// - `fleet_backend`: packets to the backend's port and from it.
    public func rules(_ index: Int) -> [(chain: Chain, match: String)] {
        let fault = faults[index]
        // (forward, back): forward runs from the link's client end (device, backend, fleet).
        let forward: (chain: Chain, match: String)
        let back: (chain: Chain, match: String)
        switch fault.link {
        case .phone:
            forward = (.links, "ip saddr @f\(index) meta l4proto tcp")
            back = (.links, "ip daddr @f\(index) meta l4proto tcp")
        case .backendPush:
            let ports = endpoints.pushServicePorts.count == 1 ? "\(endpoints.pushServicePorts[0])" : "{ " + endpoints.pushServicePorts.map(String.init).joined(separator: ", ") + " }"
            let own = "127.\(base).0.0/16"
            forward = (.inbound, "ip daddr \(endpoints.pushServiceHost) tcp dport \(ports) ip saddr != \(own)")
            back = (.links, "ip saddr \(endpoints.pushServiceHost) tcp sport \(ports) ip daddr != \(own)")
        case .fleetBackend:
            forward = (.links, "ip daddr \(endpoints.backendHost) tcp dport \(endpoints.backendPort)")
            back = (.inbound, "ip saddr \(endpoints.backendHost) tcp sport \(endpoints.backendPort)")
        }
        switch fault.kind {
        case .latency, .bandwidth, .slicer, .slowClose, .timeout, .resetPeer: return []
        case .loss(let ratio):
            let threshold = Int((ratio * 10_000).rounded())
            return [forward, back].map { ($0.chain, "\($0.match) numgen random mod 10000 < \(threshold) counter drop") }
        case .partition(let direction):
            switch direction {
            case .both: return [forward, back].map { ($0.chain, $0.match + " counter drop") }
            case .fromDevice, .toPushService, .toBackend: return [(forward.chain, forward.match + " counter drop")]
            case .toDevice, .fromPushService, .fromBackend: return [(back.chain, back.match + " counter drop")]
            }
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
