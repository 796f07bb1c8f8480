import Foundation

/// An event rate: `200/s`, `12000/m`, `5/h`, or a bare number per second.
public struct Rate: Sendable, Equatable, Codable, CustomStringConvertible {
    public var perSecond: Double

    public init(perSecond: Double) {
        self.perSecond = perSecond
    }

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let text: String
        public var description: String { "'\(text)' is not a rate; write e.g. 200/s, 12000/m or 5/h" }
    }

    public init(parsing text: String) throws(ParseError) {
        let parts = text.split(separator: "/", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
        // An empty text, or "/" alone, splits into nothing.
        guard let first = parts.first, let count = Double(first), count.isFinite, count >= 0 else { throw ParseError(text: text) }
        let divisor: Double
        switch parts.count == 2 ? parts[1] : "s" {
        case "s", "sec", "second": divisor = 1
        case "m", "min", "minute": divisor = 60
        case "h", "hour": divisor = 3600
        default: throw ParseError(text: text)
        }
        self.init(perSecond: count / divisor)
    }

    public var description: String {
        perSecond == perSecond.rounded() ? "\(Int(perSecond))/s" : "\(perSecond)/s"
    }
}

/// One stretch of an open-model load profile: the rate moves linearly to `target` over `duration`.
public struct Stage: Sendable, Equatable, Codable {
    public var duration: Duration
    public var target: Rate

    public init(duration: Duration, target: Rate) {
        self.duration = duration
        self.target = target
    }
}

/// An open-model schedule: when each event should start, whatever the target does.
///
/// The rate is piecewise linear: it starts at `startRate` and moves through the stages. The k-th
/// event is due when the integral of the rate reaches k, so a ramp produces events at exactly
/// the intended density, and a stalled target cannot slow the schedule down.
public struct LoadProfile: Sendable, Equatable, Codable {
    public var startRate: Rate
    public var stages: [Stage]

    public init(startRate: Rate = .init(perSecond: 0), stages: [Stage]) {
        self.startRate = startRate
        self.stages = stages
    }

    /// A constant rate for a duration.
    public static func constant(_ rate: Rate, for duration: Duration) -> LoadProfile {
        LoadProfile(startRate: rate, stages: [Stage(duration: duration, target: rate)])
    }

    public var totalDuration: Duration {
        stages.reduce(.zero) { $0 + $1.duration }
    }

    /// The expected number of events over the whole profile.
    public var expectedCount: Double {
        var previous = startRate.perSecond
        var total = 0.0
        for stage in stages {
            total += (previous + stage.target.perSecond) / 2 * stage.duration.seconds
            previous = stage.target.perSecond
        }
        return total
    }

    /// Intended start offsets (nanoseconds from the profile's start) of up to `limit` events.
    public func instants(limit: Int = .max) -> [Int64] {
        Array(schedule.prefix(limit))
    }

    /// The same offsets, each computed when it is asked for: a long run's schedule is never
    /// held whole (an hour at 2,000/s would be 57 MB of instants).
    public var schedule: Schedule { Schedule(profile: self) }

    public struct Schedule: Sequence, Sendable {
        let profile: LoadProfile

        public func makeIterator() -> Iterator { Iterator(profile: profile) }

        public struct Iterator: IteratorProtocol, Sendable {
            let stages: [Stage]
            var stage = 0
            var stageStart = 0.0
            var previous: Double
            var k = 1.0
            var before = 0.0  // events due before this stage

            init(profile: LoadProfile) {
                stages = profile.stages
                previous = profile.startRate.perSecond
            }

            public mutating func next() -> Int64? {
                while stage < stages.count {
                    let d = stages[stage].duration.seconds
                    let r0 = previous
                    let r1 = stages[stage].target.perSecond
                    let inStage = (r0 + r1) / 2 * d
                    if k <= before + inStage + 1e-9 {
                        let n = k - before
                        let t: Double
                        let slope = (r1 - r0) / d
                        if abs(slope) < 1e-12 {
                            t = r0 > 0 ? n / r0 : d
                        } else {
                            // n = r0 t + slope t² / 2, the root within [0, d].
                            let discriminant = Swift.max(0, r0 * r0 + 2 * slope * n)
                            t = (-r0 + discriminant.squareRoot()) / slope
                        }
                        k += 1
                        // Stages of a scenario can add up past what nanoseconds hold: the schedule saturates.
                        return Saturating.nanoseconds(seconds: stageStart + Swift.min(Swift.max(t, 0), d))
                    }
                    before += inStage
                    stageStart += d
                    previous = r1
                    stage += 1
                }
                return nil
            }
        }
    }
}
