extension Scenario {
    /// How `pushfleet capacity` searches for the highest load the target sustains at the
    /// scenario's SLO: what it varies, the ladder, the bisection and each step's window.
    public struct Capacity: Sendable, Equatable {
        public enum Vary: String, Sendable, Equatable, CaseIterable {
            /// The send rate of one traffic entry (open model).
            case rate
            /// The number of connected devices, at a fixed send rate.
            case devices
        }

        public var vary: Vary = .rate
        /// The traffic entry whose rate is varied (or kept); the first when nil.
        public var traffic: String?
        /// The first step: sends per second, or devices.
        public var start: Double
        /// The ladder's last step at most.
        public var maximum: Double
        /// Each ladder step is this many times the one before.
        public var factor: Double = 2
        /// Bisection ends once the first failing step is within this share above the last
        /// passing one.
        public var resolution: Double = 0.05
        /// Left out of each step's judgement.
        public var warmup: Duration = .seconds(3)
        /// Each step is judged over this much traffic after its warm-up.
        public var window: Duration = .seconds(10)
        /// Runs of each bracketing step, to measure the spread.
        public var repeats: Int = 3
        /// With `vary: devices`, the send rate kept at every step; the traffic entry's own when
        /// nil.
        public var rate: Rate?
        /// The least capacity that passes (`--require` overrides it).
        public var require: Double?

        public init(vary: Vary = .rate, start: Double, maximum: Double) {
            self.vary = vary
            self.start = start
            self.maximum = maximum
        }

        public static let factorRange: ClosedRange<Double> = 1.1...10
        public static let resolutionRange: ClosedRange<Double> = 0.005...0.5
        public static let warmupRange: ClosedRange<Duration> = .zero...(.seconds(600))
        public static let windowRange: ClosedRange<Duration> = .seconds(1)...(.seconds(3600))
        public static let repeatsRange: ClosedRange<Int> = 1...10
        /// Sends per second a step may ask for.
        public static let rateRange: ClosedRange<Double> = 0.1...1_000_000
        /// Steps a search makes at most, whatever its ladder and resolution ask.
        public static let maximumSteps = 60
    }
}

extension LoadProfile {
    /// The highest rate the profile reaches.
    public var peakRate: Rate {
        Rate(perSecond: stages.map(\.target.perSecond).reduce(startRate.perSecond, max))
    }
}

extension Scenario {
    /// The send rate of every step of a `vary: devices` search.
    public var capacityDevicesRate: Rate? {
        guard let capacity, capacity.vary == .devices, let index = capacityTrafficIndex else { return nil }
        return capacity.rate ?? traffic[index].profile.peakRate
    }

    /// The traffic entry a capacity search varies or keeps.
    public var capacityTrafficIndex: Int? {
        guard let capacity else { return nil }
        if let name = capacity.traffic { return traffic.firstIndex { $0.name == name } }
        return traffic.isEmpty ? nil : 0
    }

    /// The scenario one capacity step plays: the chosen traffic entry at a constant rate for the
    /// warm-up and the window (from the start of traffic), and with `vary: devices`, a fleet of
    /// about `load` devices. Other traffic entries and faults play as written.
    public func capacityStep(_ load: Double) -> Scenario {
        guard let capacity, let index = capacityTrafficIndex else { return self }
        var step = self
        let length = capacity.warmup + capacity.window
        let rate: Rate
        switch capacity.vary {
        case .rate:
            rate = Rate(perSecond: load)
        case .devices:
            rate = capacity.rate ?? traffic[index].profile.peakRate
            let perUser: Double =
                switch fleet.devicesPerUser {
                case .fixed(let n): Double(n)
                case .uniform(let low, let high): Double(low + high) / 2
                }
            step.fleet.users = max(1, Int((load / max(perUser, 1)).rounded()))
        }
        step.traffic[index].profile = .constant(rate, for: length)
        step.traffic[index].start = .zero
        return step
    }
}
