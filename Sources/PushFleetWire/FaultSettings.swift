import Foundation

/// Faults the mock push service injects; set at start and replaced at run time through
/// `PUT /admin/faults`. Every ratio is in 0...1. Randomness is drawn from a generator seeded with
/// ``seed``, so the same settings and the same sequence of pushes give the same faults.
public struct FaultSettings: Codable, Sendable, Equatable {
    /// Share of accepted pushes that are silently never delivered (the provider still gets 200).
    public var drop: Double
    /// Share of pushes answered with the platform's throttling error (APNs/FCM 429, WNS 406).
    public var throttle: Double
    /// Delay between accepting a push and delivering it to the device.
    public var latency: LatencyDistribution?
    /// Tokens answered `Unregistered` (APNs 410, FCM UNREGISTERED, WNS 410).
    public var unregisteredTokens: [String]
    /// Share of all tokens answered `Unregistered`, chosen by a stable hash of token and seed, so
    /// a token's fate does not change between pushes.
    public var unregisteredRatio: Double
    public var seed: UInt64
    /// Pushes per second the service delivers at most, through a queue of `serviceQueue`; beyond
    /// the queue it answers the platform's throttling error. Nil: no limit but the machine's.
    public var serviceRate: Double?
    /// Pushes that may wait for the service rate; nil for a quarter second's worth.
    public var serviceQueue: Int?

    public init(
        drop: Double = 0,
        throttle: Double = 0,
        latency: LatencyDistribution? = nil,
        unregisteredTokens: [String] = [],
        unregisteredRatio: Double = 0,
        seed: UInt64 = 1,
        serviceRate: Double? = nil,
        serviceQueue: Int? = nil
    ) {
        self.drop = drop
        self.throttle = throttle
        self.latency = latency
        self.unregisteredTokens = unregisteredTokens
        self.unregisteredRatio = unregisteredRatio
        self.seed = seed
        self.serviceRate = serviceRate
        self.serviceQueue = serviceQueue
    }

    enum CodingKeys: String, CodingKey {
        case drop, throttle, latency, unregisteredTokens, unregisteredRatio, seed, serviceRate, serviceQueue
    }

    /// Missing keys take their defaults, so a client can send only the knobs it sets.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            drop: try c.decodeIfPresent(Double.self, forKey: .drop) ?? 0,
            throttle: try c.decodeIfPresent(Double.self, forKey: .throttle) ?? 0,
            latency: try c.decodeIfPresent(LatencyDistribution.self, forKey: .latency),
            unregisteredTokens: try c.decodeIfPresent([String].self, forKey: .unregisteredTokens) ?? [],
            unregisteredRatio: try c.decodeIfPresent(Double.self, forKey: .unregisteredRatio) ?? 0,
            seed: try c.decodeIfPresent(UInt64.self, forKey: .seed) ?? 1,
            serviceRate: try c.decodeIfPresent(Double.self, forKey: .serviceRate),
            serviceQueue: try c.decodeIfPresent(Int.self, forKey: .serviceQueue)
        )
    }

    /// Every problem with the settings, empty when they are usable.
    public func problems() -> [String] {
        var problems: [String] = []
        for (name, value) in [("drop", drop), ("throttle", throttle), ("unregisteredRatio", unregisteredRatio)]
        where !(0...1).contains(value) {
            problems.append("\(name) must be between 0 and 1, got \(value)")
        }
        if let latency { problems += latency.problems() }
        if let serviceRate, !ServiceQueue.rateRange.contains(serviceRate) {
            problems.append("serviceRate must be between \(ServiceQueue.rateRange.lowerBound) and \(Int(ServiceQueue.rateRange.upperBound)) pushes/s, got \(serviceRate)")
        }
        if let serviceQueue, !ServiceQueue.capacityRange.contains(serviceQueue) {
            problems.append("serviceQueue must be between 1 and \(ServiceQueue.capacityRange.upperBound), got \(serviceQueue)")
        }
        if serviceQueue != nil && serviceRate == nil { problems.append("serviceQueue goes with serviceRate") }
        return problems
    }
}

/// An added-latency distribution, in milliseconds.
///
/// JSON: `{"kind":"fixed","ms":20}`, `{"kind":"uniform","minMs":5,"maxMs":50}`,
/// `{"kind":"normal","meanMs":20,"stddevMs":5}` (negative draws count as 0).
public struct LatencyDistribution: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case fixed, uniform, normal
    }

    public var kind: Kind
    public var ms: Double?
    public var minMs: Double?
    public var maxMs: Double?
    public var meanMs: Double?
    public var stddevMs: Double?

    public static func fixed(ms: Double) -> Self { .init(kind: .fixed, ms: ms) }
    public static func uniform(minMs: Double, maxMs: Double) -> Self { .init(kind: .uniform, minMs: minMs, maxMs: maxMs) }
    public static func normal(meanMs: Double, stddevMs: Double) -> Self {
        .init(kind: .normal, meanMs: meanMs, stddevMs: stddevMs)
    }

    public init(
        kind: Kind,
        ms: Double? = nil,
        minMs: Double? = nil,
        maxMs: Double? = nil,
        meanMs: Double? = nil,
        stddevMs: Double? = nil
    ) {
        self.kind = kind
        self.ms = ms
        self.minMs = minMs
        self.maxMs = maxMs
        self.meanMs = meanMs
        self.stddevMs = stddevMs
    }

    /// The longest latency a fault may add: one hour.
    public static let maximumMs: Int64 = 3_600_000

    public func problems() -> [String] {
        func nonNegative(_ name: String, _ value: Double?) -> [String] {
            guard let value else { return ["latency.\(name) is required for kind \(kind.rawValue)"] }
            return value >= 0 && value <= Double(Self.maximumMs) ? [] : ["latency.\(name) must be between 0 and \(Self.maximumMs) ms, got \(value)"]
        }
        switch kind {
        case .fixed:
            return nonNegative("ms", ms)
        case .uniform:
            let problems = nonNegative("minMs", minMs) + nonNegative("maxMs", maxMs)
            if problems.isEmpty, let minMs, let maxMs, minMs > maxMs {
                return ["latency.minMs (\(minMs)) must not exceed latency.maxMs (\(maxMs))"]
            }
            return problems
        case .normal:
            return nonNegative("meanMs", meanMs) + nonNegative("stddevMs", stddevMs)
        }
    }
}

extension LatencyDistribution {
    /// One draw, within 0…``maximumMs``; `unit` gives uniform numbers in [0, 1).
    public func draw(_ unit: () -> Double) -> Duration {
        let ms: Double
        switch kind {
        case .fixed:
            ms = self.ms ?? 0
        case .uniform:
            let low = minMs ?? 0
            let high = maxMs ?? low
            ms = low + (high - low) * unit()
        case .normal:
            // Box–Muller; 1 - u keeps the logarithm finite.
            let u1 = 1 - unit()
            let u2 = unit()
            let z = (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
            ms = (meanMs ?? 0) + (stddevMs ?? 0) * z
        }
        guard ms.isFinite, ms > 0 else { return .zero }
        return .microseconds(Int64(min(ms, Double(Self.maximumMs)) * 1000))
    }
}

/// A request to take devices offline from the service side (`POST /admin/disconnect`).
public struct DisconnectRequest: Codable, Sendable, Equatable {
    /// Share of the currently online devices to disconnect.
    public var ratio: Double?
    /// Specific tokens to disconnect.
    public var tokens: [String]?

    public init(ratio: Double? = nil, tokens: [String]? = nil) {
        self.ratio = ratio
        self.tokens = tokens
    }
}

/// The answer to a disconnect request.
public struct DisconnectResult: Codable, Sendable, Equatable {
    public var disconnected: Int

    public init(disconnected: Int) {
        self.disconnected = disconnected
    }
}
