/// A small latency summary for many rows at once (one per user, one per second): log-linear
/// buckets, 64 per power of two (a value is known to within 1.6%), kept sparse, so its size
/// follows how spread the values are, not how many there were. ``LatencyHistogram`` answers to
/// 0.1% but holds some 190 KB whatever it records: right for a run's few operations, not for
/// thousands of users.
public struct LatencySketch: Sendable, Equatable {
    /// Bucket numbers, ascending, and how many values each holds.
    private var buckets: [UInt16] = []
    private var counts: [UInt32] = []
    public private(set) var count = 0
    public private(set) var min = Int64.max
    public private(set) var max = Int64.min

    public init() {}

    static let subBits = 6

    /// The bucket of a value (nanoseconds; negative ones count as 0).
    static func bucket(_ value: Int64) -> UInt16 {
        let v = UInt64(Swift.max(0, value))
        guard v >= 1 << subBits else { return UInt16(v) }
        let exponent = 63 - v.leadingZeroBitCount
        let shift = exponent - subBits
        let mantissa = (v >> UInt64(shift)) & ((1 << UInt64(subBits)) - 1)
        return UInt16((shift + 1) << subBits) | UInt16(mantissa)
    }

    /// The values of a bucket.
    static func range(_ bucket: UInt16) -> ClosedRange<Int64> {
        let shift = Int(bucket >> UInt16(subBits)) - 1
        guard shift >= 0 else { return Int64(bucket)...Int64(bucket) }
        let mantissa = Int64(bucket & UInt16((1 << subBits) - 1)) | (1 << Int64(subBits))
        let low = mantissa << Int64(shift)
        return low...(low + (1 << Int64(shift)) - 1)
    }

    /// The values that share a bucket with `value`.
    public static func range(of value: Int64) -> ClosedRange<Int64> {
        range(bucket(value))
    }

    public mutating func record(nanoseconds value: Int64, count n: Int = 1) {
        guard n > 0 else { return }
        add(bucket: Self.bucket(value), n)
        count += n
        min = Swift.min(min, value)
        max = Swift.max(max, value)
    }

    public mutating func add(_ other: LatencySketch) {
        guard other.count > 0 else { return }
        for (bucket, n) in zip(other.buckets, other.counts) { add(bucket: bucket, Int(n)) }
        count += other.count
        min = Swift.min(min, other.min)
        max = Swift.max(max, other.max)
    }

    private mutating func add(bucket: UInt16, _ n: Int) {
        var low = 0
        var high = buckets.count
        while low < high {
            let mid = (low + high) / 2
            if buckets[mid] < bucket { low = mid + 1 } else { high = mid }
        }
        if low < buckets.count && buckets[low] == bucket {
            counts[low] = UInt32(clamping: Int(counts[low]) + n)
        } else {
            buckets.insert(bucket, at: low)
            counts.insert(UInt32(clamping: n), at: low)
        }
    }

    /// The nearest-rank percentile (0...100): the middle of the bucket holding that rank, kept
    /// within the smallest and largest values recorded; nil when empty.
    public func percentile(_ p: Double) -> Int64? {
        guard count > 0 else { return nil }
        let rank = Swift.min(Swift.max(Int((p / 100 * Double(count)).rounded(.up)), 1), count)
        var seen = 0
        for (bucket, n) in zip(buckets, counts) {
            seen += Int(n)
            if seen >= rank {
                let range = Self.range(bucket)
                let middle = range.lowerBound + (range.upperBound - range.lowerBound) / 2
                return Swift.min(Swift.max(middle, min), max)
            }
        }
        return max
    }

    /// Buckets in ascending order with their counts and value ranges.
    public var occupied: [(range: ClosedRange<Int64>, count: Int)] {
        zip(buckets, counts).map { (Self.range($0), Int($1)) }
    }
}
