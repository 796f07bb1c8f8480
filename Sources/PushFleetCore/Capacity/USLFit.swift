import Foundation

/// Universal Scalability Law fit (Gunther): X(N) = λ·N / (1 + σ·(N−1) + κ·N·(N−1)),
/// with N = offered load (e.g. sends/s) and X = achieved throughput (completed/s).
public struct USLFit: Sendable, Equatable, Codable {
    /// Closed interval [low, high], used for 95% confidence intervals.
    public struct Interval: Sendable, Equatable, Codable {
        /// Lower bound.
        public let low: Double
        /// Upper bound.
        public let high: Double
    }

    /// Contention coefficient σ ∈ [0, 1): serialisation cost.
    public let sigma: Double
    /// Coherency coefficient κ ≥ 0: crosstalk cost that makes throughput fall after a peak.
    public let kappa: Double
    /// Ideal throughput per unit load at low load (λ > 0).
    public let lambda: Double
    /// Standard error of σ.
    public let sigmaStandardError: Double
    /// Standard error of κ.
    public let kappaStandardError: Double
    /// Standard error of λ.
    public let lambdaStandardError: Double
    /// 95% confidence interval for σ (Student's t, n−3 dof).
    public let sigmaInterval: Interval
    /// 95% confidence interval for κ (Student's t, n−3 dof).
    public let kappaInterval: Interval
    /// 95% confidence interval for λ (Student's t, n−3 dof).
    public let lambdaInterval: Interval
    /// Coefficient of determination of the fit.
    public let rSquared: Double
    /// Number of data points used.
    public let points: Int

    /// Load N* = sqrt((1−σ)/κ) where throughput peaks; nil when κ = 0 (no retrograde region).
    public var peakLoad: Double? {
        guard kappa > 0, sigma < 1 else { return nil }
        let n = ((1 - sigma) / kappa).squareRoot()
        return n.isFinite ? n : nil
    }

    /// Predicted maximum throughput X(N*); nil when there is no peak.
    public var peakThroughput: Double? { peakLoad.map { throughput(at: $0) } }

    /// Predicted achieved throughput at offered load `n`.
    public func throughput(at n: Double) -> Double {
        Self.model(n, sigma, kappa, lambda)
    }

    /// Fits the USL by Levenberg–Marquardt; nil if the data does not support a fit
    /// (< 4 distinct positive loads, non-finite input, singular JᵀJ, no convergence, or R² < 0.8).
    public static func fit(load: [Double], throughput: [Double]) -> USLFit? {
        let n = load.count
        guard n >= 4, throughput.count == n,
              load.allSatisfy({ $0.isFinite && $0 > 0 }), throughput.allSatisfy(\.isFinite),
              Set(load).count >= 4, let nMax = load.max() else { return nil }

        // Initial λ: least-squares line through the origin over the lowest third of loads.
        let low = load.indices.sorted { load[$0] < load[$1] }.prefix(max(1, n / 3))
        let sxy = low.reduce(0.0) { $0 + load[$1] * throughput[$1] }
        let sxx = low.reduce(0.0) { $0 + load[$1] * load[$1] }
        let lambda0 = sxy / sxx
        guard lambda0 > 0, lambda0.isFinite else { return nil }

        // Work in scaled parameters p = (σ, κ·nMax², λ/λ0) so all are O(1).
        let scale = [1.0, 1.0 / (nMax * nMax), lambda0]
        var best: (p: [Double], sse: Double)?
        for s0 in [0.0, 0.05, 0.3] {
            for k0 in [0.0, 0.1, 1.0, 10.0] {
                guard let r = levenbergMarquardt(start: [s0, k0, 1.0], scale: scale, load: load, y: throughput)
                else { continue }
                if r.sse < (best?.sse ?? .infinity) { best = r }
            }
        }
        guard let (p, sse) = best else { return nil }

        let mean = throughput.reduce(0, +) / Double(n)
        let sst = throughput.reduce(0.0) { $0 + ($1 - mean) * ($1 - mean) }
        guard sst > 0 else { return nil }
        let r2 = 1 - sse / sst
        guard r2 >= 0.8 else { return nil }

        let (jtj, _) = normalEquations(p, scale: scale, load: load, y: throughput)
        guard let cov = invert3(jtj) else { return nil }
        let dof = n - 3
        let s2 = sse / Double(dof)
        let t = tQuantile975(dof)
        let se = (0..<3).map { (s2 * max(cov[$0][$0], 0)).squareRoot() * scale[$0] }
        let v = (0..<3).map { p[$0] * scale[$0] }
        guard v.allSatisfy(\.isFinite), se.allSatisfy(\.isFinite) else { return nil }
        func ci(_ i: Int) -> Interval { Interval(low: v[i] - t * se[i], high: v[i] + t * se[i]) }
        return USLFit(
            sigma: v[0], kappa: v[1], lambda: v[2],
            sigmaStandardError: se[0], kappaStandardError: se[1], lambdaStandardError: se[2],
            sigmaInterval: ci(0), kappaInterval: ci(1), lambdaInterval: ci(2),
            rSquared: r2, points: n)
    }

    // MARK: - Internals

    private static func model(_ n: Double, _ s: Double, _ k: Double, _ l: Double) -> Double {
        l * n / (1 + s * (n - 1) + k * n * (n - 1))
    }

    private static func sse(_ p: [Double], scale: [Double], load: [Double], y: [Double]) -> Double {
        var total = 0.0
        for i in load.indices {
            let r = y[i] - model(load[i], p[0] * scale[0], p[1] * scale[1], p[2] * scale[2])
            total += r * r
        }
        return total
    }

    /// JᵀJ and Jᵀr in scaled parameters.
    private static func normalEquations(
        _ p: [Double], scale: [Double], load: [Double], y: [Double]
    ) -> ([[Double]], [Double]) {
        var a = [[Double]](repeating: [0, 0, 0], count: 3)
        var g = [0.0, 0.0, 0.0]
        let (s, k, l) = (p[0] * scale[0], p[1] * scale[1], p[2] * scale[2])
        for i in load.indices {
            let nn = load[i]
            let d = 1 + s * (nn - 1) + k * nn * (nn - 1)
            let x = l * nn / d
            let j = [-x * (nn - 1) / d * scale[0], -x * nn * (nn - 1) / d * scale[1], nn / d * scale[2]]
            let r = y[i] - x
            for u in 0..<3 {
                g[u] += j[u] * r
                for w in 0..<3 { a[u][w] += j[u] * j[w] }
            }
        }
        return (a, g)
    }

    private static func clamp(_ p: [Double]) -> [Double] {
        [min(max(p[0], 0), 1 - 1e-12), max(p[1], 0), max(p[2], 1e-12)]
    }

    /// Projected Levenberg–Marquardt with Marquardt (diagonal) damping; nil if it fails to converge.
    private static func levenbergMarquardt(
        start: [Double], scale: [Double], load: [Double], y: [Double]
    ) -> (p: [Double], sse: Double)? {
        var p = clamp(start)
        var cost = sse(p, scale: scale, load: load, y: y)
        var mu = 1e-3
        for _ in 0..<500 {
            if cost == 0 { return (p, cost) }
            let (a, g) = normalEquations(p, scale: scale, load: load, y: y)
            var improved = false
            while mu < 1e12 {
                var damped = a
                for u in 0..<3 { damped[u][u] += mu * max(a[u][u], 1e-300) }
                guard let inv = invert3(damped) else { mu *= 10; continue }
                let step = (0..<3).map { u in (0..<3).reduce(0.0) { $0 + inv[u][$1] * g[$1] } }
                let candidate = clamp((0..<3).map { p[$0] + step[$0] })
                let newCost = sse(candidate, scale: scale, load: load, y: y)
                if newCost.isFinite && newCost < cost {
                    let change = zip(candidate, p).map { abs($0 - $1) / max(abs($1), 1e-3) }.max() ?? 0
                    let gain = (cost - newCost) / cost
                    p = candidate
                    cost = newCost
                    mu = max(mu / 10, 1e-12)
                    improved = true
                    if gain < 1e-14 || change < 1e-12 { return (p, cost) }
                    break
                }
                mu *= 10
            }
            // No downhill step at any damping: a (possibly constrained) local minimum.
            if !improved { return (p, cost) }
        }
        return nil
    }

    /// Inverse of a 3×3 matrix by Gauss–Jordan with partial pivoting; nil if (near-)singular.
    private static func invert3(_ m: [[Double]]) -> [[Double]]? {
        // Equilibrate by the diagonal so the singularity test is scale-free.
        let d = (0..<3).map { m[$0][$0] > 0 ? 1 / m[$0][$0].squareRoot() : 0 }
        guard d.allSatisfy({ $0 > 0 && $0.isFinite }) else { return nil }
        var a = (0..<3).map { u in (0..<3).map { w in m[u][w] * d[u] * d[w] } + (0..<3).map { $0 == u ? 1.0 : 0.0 } }
        for c in 0..<3 {
            guard let piv = (c..<3).max(by: { abs(a[$0][c]) < abs(a[$1][c]) }), abs(a[piv][c]) > 1e-13
            else { return nil }
            a.swapAt(c, piv)
            let f = a[c][c]
            a[c] = a[c].map { $0 / f }
            for r in 0..<3 where r != c {
                let k = a[r][c]
                if k != 0 { a[r] = (0..<6).map { a[r][$0] - k * a[c][$0] } }
            }
        }
        return (0..<3).map { u in (0..<3).map { w in a[u][w + 3] * d[u] * d[w] } }
    }

    /// Two-sided 95% Student's t quantile: table up to 30 dof, Cornish–Fisher expansion beyond.
    private static func tQuantile975(_ dof: Int) -> Double {
        let table: [Double] = [
            12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
            2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
            2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
        ]
        if dof >= 1 && dof <= table.count { return table[dof - 1] }
        let z = 1.959963984540054, v = Double(dof)
        let z3 = z * z * z, z5 = z3 * z * z
        return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v)
    }
}
