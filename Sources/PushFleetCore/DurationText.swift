import Foundation

/// Parses durations written the way scenario files and flags write them: `250ms`, `30s`, `2m`,
/// `1h`, `1.5s`, `500us`. A bare number is seconds.
public enum DurationText {
    public struct ParseError: Error, CustomStringConvertible, Equatable {
        public let text: String
        public var description: String {
            "'\(text)' is not a duration; write a number with a unit, e.g. 250ms, 30s, 2m, 1h"
        }
    }

    private static let units: [(suffix: String, nanoseconds: Double)] = [
        ("ns", 1), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9), ("m", 60e9), ("h", 3600e9), ("d", 86400e9),
    ]

    public static func parse(_ text: String) throws(ParseError) -> Duration {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var number = Substring(trimmed)
        var scale = 1e9
        // Longest suffix first so that "ms" is not read as "m".
        for unit in units.sorted(by: { $0.suffix.count > $1.suffix.count }) where trimmed.hasSuffix(unit.suffix) {
            number = trimmed.dropLast(unit.suffix.count)
            scale = unit.nanoseconds
            break
        }
        guard let value = Double(number.trimmingCharacters(in: .whitespaces)), value.isFinite, value >= 0 else {
            throw ParseError(text: text)
        }
        let nanoseconds = value * scale
        guard nanoseconds < Double(Int64.max) else { throw ParseError(text: text) }
        return .nanoseconds(Int64(nanoseconds.rounded()))
    }

    /// A compact rendering: `250ms`, `1.5s`, `2m`.
    public static func format(_ duration: Duration) -> String {
        let ns = Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
        if ns >= 3600e9, ns.truncatingRemainder(dividingBy: 3600e9) == 0 { return "\(Int(ns / 3600e9))h" }
        if ns >= 60e9, ns.truncatingRemainder(dividingBy: 60e9) == 0 { return "\(Int(ns / 60e9))m" }
        if ns >= 1e9 { return "\(trim(ns / 1e9))s" }
        if ns >= 1e6 { return "\(trim(ns / 1e6))ms" }
        if ns >= 1e3 { return "\(trim(ns / 1e3))us" }
        return "\(Int(ns))ns"
    }

    private static func trim(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.3g", value)
    }
}

extension Duration {
    /// The duration in (fractional) seconds.
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// The duration in whole nanoseconds, saturating at `Int64`'s bounds (about 292 years): sums of
    /// durations from a scenario can pass them.
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? (seconds < 0 ? .min : .max) : Saturating.add(whole, attoseconds / 1_000_000_000)
    }
}
