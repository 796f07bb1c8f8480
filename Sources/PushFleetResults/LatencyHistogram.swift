public import Histogram

/// A latency histogram in nanoseconds (1 µs to 1 h, 3 significant digits), mergeable and
/// serialisable without loss.
public struct LatencyHistogram: Sendable, Codable {
    public private(set) var histogram: Histogram<UInt64>

    public init() {
        histogram = Histogram(lowestDiscernibleValue: 1000, highestTrackableValue: 3_600_000_000_000, numberOfSignificantValueDigits: .three)
    }

    public mutating func record(nanoseconds: Int64) {
        // Values outside the range are clamped rather than lost.
        _ = histogram.record(UInt64(Swift.min(Swift.max(nanoseconds, 1000), 3_600_000_000_000)))
    }

    public mutating func add(_ other: LatencyHistogram) {
        histogram.add(other.histogram)
    }

    public var count: Int { Int(histogram.totalCount) }

    /// Nanoseconds at a percentile (0...100); 0 when empty.
    public func percentile(_ p: Double) -> Int64 {
        count == 0 ? 0 : Int64(histogram.valueAtPercentile(p))
    }

    public var min: Int64 { count == 0 ? 0 : Int64(histogram.min) }
    public var max: Int64 { count == 0 ? 0 : Int64(histogram.max) }
    public var mean: Double { count == 0 ? 0 : histogram.mean }

    /// Percentile curve points (percentile, nanoseconds), for charts.
    public func curve(ticksPerHalfDistance: Int = 5) -> [(percentile: Double, value: Int64)] {
        guard count > 0 else { return [] }
        return histogram.percentiles(ticksPerHalfDistance: ticksPerHalfDistance).map { ($0.percentile, Int64($0.value)) }
    }

    // Serialised with the library's own Codable form: every bucket, so a decoded histogram
    // answers every percentile exactly as the original did.
    public func encode(to encoder: any Encoder) throws {
        try histogram.encode(to: encoder)
    }

    public init(from decoder: any Decoder) throws {
        histogram = try Histogram<UInt64>(from: decoder)
    }
}
