import Foundation

/// A pass/fail rule on a named metric, in k6's style: `p(99) < 250ms`, `count == 0`,
/// `value < 0.001`.
///
/// Grammar:
/// ```
/// threshold  := aggregate op number [unit]
/// aggregate  := "count" | "value" | "rate" | "avg" | "min" | "max" | "med" | "p(" number ")"
/// op         := "<" | "<=" | ">" | ">=" | "==" | "!="
/// unit       := "ns" | "us" | "ms" | "s" | "m" | "%"
/// ```
/// Latency metrics take percentiles, avg, min, max, med and count; counters take count (or
/// value); ratios take value (or rate). Durations compare in nanoseconds; `%` divides by 100.
public struct Threshold: Sendable, Equatable, Codable {
    public enum Aggregate: Sendable, Equatable, Codable, CustomStringConvertible {
        case count, value, avg, min, max, med
        case percentile(Double)

        public var description: String {
            switch self {
            case .count: "count"
            case .value: "value"
            case .avg: "avg"
            case .min: "min"
            case .max: "max"
            case .med: "med"
            case .percentile(let p): "p(\(p == p.rounded() ? String(Int(p)) : String(p)))"
            }
        }
    }

    public enum Comparison: String, Sendable, Equatable, Codable, CaseIterable {
        case less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">=", equal = "==", notEqual = "!="

        public func holds(_ lhs: Double, _ rhs: Double) -> Bool {
            switch self {
            case .less: lhs < rhs
            case .lessOrEqual: lhs <= rhs
            case .greater: lhs > rhs
            case .greaterOrEqual: lhs >= rhs
            case .equal: lhs == rhs
            case .notEqual: lhs != rhs
            }
        }
    }

    public var metric: String
    public var expression: String
    public var aggregate: Aggregate
    public var comparison: Comparison
    /// The bound, in the metric's base unit (nanoseconds for latencies).
    public var bound: Double
    /// Stop the run once the rule fails over the live window (k6's `abortOnFail`); nil: never.
    public var abortOnFail: AbortOnFail?

    public struct AbortOnFail: Sendable, Equatable, Codable {
        /// Not judged for this long after the traffic starts (k6's `delayAbortEval`).
        public var delay: Duration

        public init(delay: Duration = .zero) {
            self.delay = delay
        }
    }

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    public init(metric: String, expression: String) throws(ParseError) {
        self.metric = metric
        self.expression = expression
        let text = expression.trimmingCharacters(in: .whitespaces)
        guard let opRange = Self.operatorRange(in: text) else {
            throw ParseError(message: "no comparison in '\(expression)'; expected e.g. 'p(99) < 250ms' or 'count == 0'")
        }
        let lhs = text[..<opRange.lowerBound].trimmingCharacters(in: .whitespaces)
        let op = String(text[opRange])
        let rhs = text[opRange.upperBound...].trimmingCharacters(in: .whitespaces)
        self.comparison = Comparison(rawValue: op)!
        self.aggregate = try Self.parseAggregate(lhs, expression: expression)
        self.bound = try Self.parseNumber(rhs, expression: expression)
    }

    private static func operatorRange(in text: String) -> Range<String.Index>? {
        for op in ["<=", ">=", "==", "!=", "<", ">"] {
            if let range = text.range(of: op) { return range }
        }
        return nil
    }

    private static func parseAggregate(_ text: String, expression: String) throws(ParseError) -> Aggregate {
        switch text {
        case "count": return .count
        case "value", "rate": return .value
        case "avg": return .avg
        case "min": return .min
        case "max": return .max
        case "med": return .med
        default:
            guard text.hasPrefix("p("), text.hasSuffix(")"), let p = Double(text.dropFirst(2).dropLast()), p > 0, p <= 100 else {
                throw ParseError(
                    message: "'\(text)' in '\(expression)' is not an aggregate; use count, value, avg, min, max, med or p(N) with 0 < N <= 100"
                )
            }
            return .percentile(p)
        }
    }

    private static func parseNumber(_ text: String, expression: String) throws(ParseError) -> Double {
        let units: [(String, Double)] = [("ns", 1), ("us", 1e3), ("ms", 1e6), ("s", 1e9), ("m", 60e9), ("%", 0.01)]
        var parsed: Double?
        for (suffix, scale) in units where parsed == nil && text.hasSuffix(suffix) {
            parsed = Double(text.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)).map { $0 * scale }
        }
        guard let value = parsed ?? Double(text) else {
            throw ParseError(message: "'\(text)' in '\(expression)' is not a number (units: ns, us, ms, s, m, %)")
        }
        // An infinite or NaN bound makes a rule that always holds (or never does): a gate that
        // cannot fail is a false pass waiting to happen.
        guard value.isFinite else {
            throw ParseError(message: "'\(text)' in '\(expression)' is not a finite number")
        }
        return value
    }

    /// Whether the rule holds for a measured value.
    public func holds(for measured: Double) -> Bool {
        comparison.holds(measured, bound)
    }
}

/// The kinds of metric a threshold can name, and the aggregates each one offers.
public enum MetricKind: Sendable, Equatable {
    case latency
    case counter
    case ratio

    public func supports(_ aggregate: Threshold.Aggregate) -> Bool {
        switch (self, aggregate) {
        case (.latency, .value): false
        case (.latency, _): true
        case (.counter, .count), (.counter, .value): true
        case (.ratio, .value): true
        default: false
        }
    }
}
