import Foundation

/// Knee/elbow detection per Satopää et al. (2011), "Finding a 'Kneedle' in a Haystack".
public enum Kneedle {
    /// Shape of the curve around the knee.
    public enum Curve: Sendable {
        /// Rises then flattens (e.g. achieved throughput vs offered load).
        case concave
        /// Flat then shoots up (e.g. p99 latency vs offered load).
        case convex
    }

    /// Overall trend of y as x grows.
    public enum Direction: Sendable {
        /// y grows with x.
        case increasing
        /// y shrinks as x grows.
        case decreasing
    }

    /// Index into the original (possibly unsorted) arrays of the knee point, or nil if none is found.
    /// Needs ≥ 3 finite points with distinct x; `sensitivity` is the paper's S (higher = more conservative).
    public static func knee(
        x: [Double], y: [Double], curve: Curve, direction: Direction, sensitivity: Double = 1
    ) -> Int? {
        let n = x.count
        guard n >= 3, y.count == n, sensitivity.isFinite, sensitivity >= 0,
              x.allSatisfy(\.isFinite), y.allSatisfy(\.isFinite) else { return nil }

        // Stable sort by x, remembering original indices.
        let order = (0..<n).sorted { x[$0] < x[$1] || (x[$0] == x[$1] && $0 < $1) }
        let xs = order.map { x[$0] }
        let ys = order.map { y[$0] }
        for i in 1..<n where xs[i] == xs[i - 1] { return nil }

        guard let xMin = xs.first, let xMax = xs.last, let yMin = ys.min(), let yMax = ys.max(),
              xMax > xMin, yMax > yMin else { return nil }
        var xn = xs.map { ($0 - xMin) / (xMax - xMin) }
        var yn = ys.map { ($0 - yMin) / (yMax - yMin) }

        // Map every case onto "concave increasing" so the knee is a maximum of y_n − x_n.
        // Flipping x reverses the order, so keep a map from transformed position to sorted position.
        var position = Array(0..<n)
        switch (curve, direction) {
        case (.concave, .increasing):
            break
        case (.convex, .decreasing):
            yn = yn.map { 1 - $0 }
        case (.convex, .increasing):
            xn = xn.reversed().map { 1 - $0 }
            yn = yn.reversed().map { 1 - $0 }
            position.reverse()
        case (.concave, .decreasing):
            xn = xn.reversed().map { 1 - $0 }
            yn.reverse()
            position.reverse()
        }

        let diff = (0..<n).map { yn[$0] - xn[$0] }
        // Mean spacing of normalised x; equals 1/(n−1) since x_n spans [0, 1].
        let meanStep = 1.0 / Double(n - 1)

        // Interior local maxima (first point of a plateau counts once).
        let maxima = (1..<(n - 1)).filter { diff[$0] > diff[$0 - 1] && diff[$0] >= diff[$0 + 1] }

        for (k, m) in maxima.enumerated() {
            let threshold = diff[m] - sensitivity * meanStep
            let end = k + 1 < maxima.count ? maxima[k + 1] : n - 1
            var j = m + 1
            while j <= end {
                if diff[j] < threshold { return order[position[m]] }
                j += 1
            }
        }

        // Offline fallback: global maximum of the difference curve, if it is meaningfully positive.
        guard let best = diff.indices.max(by: { diff[$0] < diff[$1] }), diff[best] > 1e-9 else { return nil }
        return order[position[best]]
    }
}
