/// The fleet a scenario describes, generated deterministically from its seed: the same scenario
/// gives the same users, devices, tokens, platforms, arrival times and probes.
public struct FleetPlan: Sendable {
    public struct Device: Sendable, Equatable {
        public var index: Int
        public var user: Int
        public var platform: Scenario.PlatformName
        public var token: String
        /// Intended arrival, in nanoseconds from the start of the run.
        public var arrival: Int64
        /// This device also probes for leaks.
        public var probe: Bool
    }

    public var users: Int
    public var devices: [Device]
    public var devicesOfUser: [[Int]]
    /// The run id in every token; empty in plans that only validate or count.
    public var runID: String

    /// - Parameter runID: put into every token, so that a push service that outlives a run
    ///   never hands one run's pushes to the next run's devices; empty in plans that only
    ///   validate or count.
    public init(scenario: Scenario, runID: String = "") {
        self.runID = runID
        var rng = SplitMix64(seed: scenario.seed ^ 0xF1EE7)
        let fleet = scenario.fleet
        let platforms = fleet.platforms.sorted { $0.key < $1.key }
        let totalWeight = platforms.reduce(0) { $0 + $1.value }
        var devices: [Device] = []
        var devicesOfUser = Array(repeating: [Int](), count: fleet.users)
        for user in 0..<fleet.users {
            let count: Int
            switch fleet.devicesPerUser {
            case .fixed(let n): count = n
            case .uniform(let low, let high): count = low + Int(rng.next() % UInt64(high - low + 1))
            }
            for _ in 0..<count {
                var pick = rng.nextUnit() * totalWeight
                var platform = platforms.last!.key
                for (name, weight) in platforms {
                    if pick < weight {
                        platform = name
                        break
                    }
                    pick -= weight
                }
                let index = devices.count
                devicesOfUser[user].append(index)
                devices.append(
                    Device(
                        index: index, user: user, platform: platform, token: Self.token(platform: platform, run: runID, rng: &rng), arrival: 0,
                        probe: scenario.leakProbeShare > 0 && rng.nextUnit() < scenario.leakProbeShare
                    )
                )
            }
        }
        if let arrival = fleet.arrival {
            let instants = Self.arrivals(arrival, count: devices.count)
            for index in devices.indices { devices[index].arrival = instants[index] }
        }
        self.users = fleet.users
        self.devices = devices
        self.devicesOfUser = devicesOfUser
    }

    /// Arrival instants for `count` devices; past the profile's end the last rate goes on.
    static func arrivals(_ profile: LoadProfile, count: Int) -> [Int64] {
        var instants = profile.instants(limit: count)
        let rate = profile.stages.last?.target.perSecond ?? profile.startRate.perSecond
        let end = instants.last ?? 0
        let base = max(end, profile.totalDuration.nanoseconds)
        var k = 1.0
        while instants.count < count {
            // A slow enough rate puts the last devices past what nanoseconds hold: they saturate.
            instants.append(rate > 0 ? Saturating.add(base, Saturating.nanoseconds(seconds: k / rate)) : base)
            k += 1
        }
        return instants
    }

    /// Tokens shaped like each platform's: 64 hex digits for APNs (the run id's hex digits
    /// first), FCM-like and WNS channel ids and Web Push
    /// subscription ids (with the run id).
    static func token(platform: Scenario.PlatformName, run: String, rng: inout SplitMix64) -> String {
        switch platform {
        case .apns:
            let random = (0..<4).map { _ in
                let hex = String(rng.next(), radix: 16)
                return String(repeating: "0", count: 16 - hex.count) + hex
            }.joined()
            let prefix = run.lowercased().filter(\.isHexDigit).prefix(16)
            return String(prefix) + random.dropFirst(prefix.count)
        case .fcm:
            return "fcm_" + (run.isEmpty ? "" : run + "_") + String(rng.next(), radix: 36) + String(rng.next(), radix: 36)
        case .wns:
            return "wns-" + (run.isEmpty ? "" : run + "-") + String(rng.next(), radix: 36) + String(rng.next(), radix: 36)
        case .webpush:
            // The push service's subscription id: base64url, 16 to 512 characters.
            let id = "wp_" + (run.isEmpty ? "" : run.filter { $0.isASCII && ($0.isLetter || $0.isNumber) || $0 == "-" || $0 == "_" }.prefix(64) + "_")
            return id + String(rng.next(), radix: 36) + String(rng.next(), radix: 36)
        }
    }
}

/// How a fleet's users are named and what their passwords are: `user1` … `userN` with the
/// demo rule (password = name), or the entries of a credentials file.
public struct FleetNames: Sendable, Equatable {
    public struct Credential: Sendable, Equatable {
        public var user: String
        public var password: String

        public init(user: String, password: String) {
            self.user = user
            self.password = password
        }
    }

    public var credentials: [Credential]?

    public init(credentials: [Credential]? = nil) {
        self.credentials = credentials
    }

    public func user(_ index: Int) -> String {
        credentials?[index].user ?? "user\(index + 1)"
    }

    public func password(_ index: Int) -> String {
        credentials?[index].password ?? user(index)
    }

    public func userIndex(_ name: String, users: Int) -> Int? {
        if let credentials {
            guard let index = credentials.prefix(users).firstIndex(where: { $0.user == name }) else { return nil }
            return index
        }
        guard name.hasPrefix("user"), let number = Int(name.dropFirst(4)), (1...users).contains(number) else { return nil }
        return number - 1
    }
}
