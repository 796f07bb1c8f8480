import Foundation
import PushFleetCore
import PushFleetResults
import Testing

/// The per-user and per-second summaries of a run that folded: percentiles within a bucket of the
/// exact nearest rank, and merging the same as recording everything in one.
@Suite("Latency sketch")
struct LatencySketchTests {
    static func exact(_ sorted: [Int64], _ p: Double) -> Int64 {
        let rank = min(max(Int((p / 100 * Double(sorted.count)).rounded(.up)), 1), sorted.count)
        return sorted[rank - 1]
    }

    @Test("on random latencies every percentile is within 1/64 of the exact nearest rank, and the sketch stays small")
    func percentiles() {
        for seed in UInt64(1)...300 {
            var rng = SplitMix64(seed: seed)
            let count = 1 + Int(rng.next() % 3000)
            // Log-uniform from 1 µs to about 100 s, with ties.
            let values = (0..<count).map { _ in Int64(pow(10, 3 + 8 * rng.nextUnit())) }
            var sketch = LatencySketch()
            for value in values { sketch.record(nanoseconds: value) }
            let sorted = values.sorted()
            #expect(sketch.count == count)
            #expect(sketch.min == sorted.first && sketch.max == sorted.last)
            for p in [0.1, 1, 50, 90, 99, 99.9, 100] {
                let want = Self.exact(sorted, p)
                let got = sketch.percentile(p) ?? -1
                #expect(abs(Double(got - want)) <= Double(want) / 64 + 1, "seed \(seed) p\(p): \(got) vs \(want)")
            }
            // 64 buckets per power of two over 27 powers at most.
            #expect(sketch.occupied.count <= 64 * 27)
        }
        #expect(LatencySketch().percentile(50) == nil)
    }

    @Test("sketches merged answer as one that recorded everything; buckets tile the values without gaps")
    func merge() {
        var rng = SplitMix64(seed: 42)
        var whole = LatencySketch()
        var parts = [LatencySketch](repeating: LatencySketch(), count: 5)
        for _ in 0..<5000 {
            let value = Int64(rng.next() % 10_000_000_000)
            whole.record(nanoseconds: value)
            parts[Int(rng.next() % 5)].record(nanoseconds: value)
        }
        var merged = LatencySketch()
        for part in parts { merged.add(part) }
        #expect(merged == whole)
        for value in [Int64(0), 1, 63, 64, 65, 127, 128, 1_000, 999_999, 1 << 40, Int64.max / 2] {
            let range = LatencySketch.range(of: value)
            #expect(range.contains(value))
            #expect(Double(range.upperBound - range.lowerBound) <= max(0, Double(range.lowerBound) / 64))
        }
        // Consecutive buckets meet: the value after a bucket's last starts the next one.
        var value: Int64 = 0
        while value < 1 << 20 {
            let range = LatencySketch.range(of: value)
            #expect(range.lowerBound == value)
            value = range.upperBound + 1
        }
    }
}
