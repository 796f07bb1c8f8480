/// Arithmetic on instants and durations that come from outside (headers, admin requests): a
/// value past the representable range stops at the bound instead of trapping.
public enum Saturating {
    public static func add(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b > 0 ? .max : .min) : sum
    }

    public static func subtract(_ a: Int64, _ b: Int64) -> Int64 {
        let (difference, overflow) = a.subtractingReportingOverflow(b)
        return overflow ? (b < 0 ? .max : .min) : difference
    }

    public static func multiply(_ a: Int64, _ b: Int64) -> Int64 {
        let (product, overflow) = a.multipliedReportingOverflow(by: b)
        return overflow ? ((a < 0) != (b < 0) ? .min : .max) : product
    }

    /// Nanoseconds of a non-negative number of seconds (a schedule's instant), rounded, capped at
    /// `Int64.max`; NaN counts as 0.
    public static func nanoseconds(seconds: Double) -> Int64 {
        let value = (max(0, seconds) * 1e9).rounded()
        return value < 9.2e18 ? Int64(value) : .max
    }

    /// Nanoseconds of a finite, non-negative number of milliseconds, capped at `Int64.max`.
    public static func nanoseconds(milliseconds: Double) -> Int64 {
        let value = max(0, milliseconds) * 1e6
        return value.isFinite && value < 9.2e18 ? Int64(value) : .max
    }
}

extension UInt32 {
    /// The value, or one less than `limit` when it is not below it.
    package func clamped(below limit: UInt32) -> UInt32 { self < limit ? self : limit - 1 }
}
