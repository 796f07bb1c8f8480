import Foundation
import Testing
import PushFleetCore

/// Deterministic PRNG so noisy tests are reproducible.
struct NoiseSource: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in [-1, 1].
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) * 2 - 1 }
}

@Suite struct KneedleTests {
    let xs = (1...20).map(Double.init)

    func noisyConcave() -> [Double] {
        var rng = NoiseSource(state: 42)
        return xs.map { min($0, 10) + 0.05 * rng.unit() }
    }

    @Test func concaveKneeNearTen() throws {
        let i = try #require(Kneedle.knee(x: xs, y: noisyConcave(), curve: .concave, direction: .increasing))
        #expect(abs(xs[i] - 10) <= 1)
    }

    @Test func convexHockeyStickNearTwelve() throws {
        var rng = NoiseSource(state: 7)
        let y = xs.map { ($0 <= 12 ? 1 : 1 + 5 * ($0 - 12)) + 0.02 * rng.unit() }
        let i = try #require(Kneedle.knee(x: xs, y: y, curve: .convex, direction: .increasing))
        #expect(abs(xs[i] - 12) <= 1)
    }

    @Test func decreasingVariantsMirrorIncreasing() throws {
        // y = 1/x is convex decreasing with the elbow early; a falling concave curve knees late.
        let a = try #require(Kneedle.knee(x: xs, y: xs.map { 1 / $0 }, curve: .convex, direction: .decreasing))
        #expect(xs[a] <= 5)
        let b = try #require(Kneedle.knee(
            x: xs, y: xs.map { $0 <= 14 ? 100 : 100 - 10 * ($0 - 14) }, curve: .concave, direction: .decreasing))
        #expect(abs(xs[b] - 14) <= 1)
    }

    @Test func straightLineHasNoKnee() {
        #expect(Kneedle.knee(x: xs, y: xs.map { 3 * $0 + 2 }, curve: .concave, direction: .increasing) == nil)
        #expect(Kneedle.knee(x: xs, y: xs.map { 3 * $0 + 2 }, curve: .convex, direction: .increasing) == nil)
    }

    @Test func invalidInputGivesNil() {
        #expect(Kneedle.knee(x: [1, 2], y: [1, 2], curve: .concave, direction: .increasing) == nil)
        #expect(Kneedle.knee(x: [1, 2, 3], y: [1, .nan, 3], curve: .concave, direction: .increasing) == nil)
        #expect(Kneedle.knee(x: [1, 2, 2, 3], y: [1, 2, 3, 3], curve: .concave, direction: .increasing) == nil)
    }

    @Test func unsortedInputMapsToOriginalIndex() throws {
        let y = noisyConcave()
        let sorted = try #require(Kneedle.knee(x: xs, y: y, curve: .concave, direction: .increasing))
        var rng = NoiseSource(state: 99)
        let perm = Array(xs.indices).shuffled(using: &rng)
        #expect(perm != Array(xs.indices))
        let px = perm.map { xs[$0] }, py = perm.map { y[$0] }
        let i = try #require(Kneedle.knee(x: px, y: py, curve: .concave, direction: .increasing))
        #expect(px[i] == xs[sorted])
        #expect(py[i] == y[sorted])
    }
}

@Suite struct USLFitTests {
    static let truth = (sigma: 0.02, kappa: 0.0001, lambda: 1.0)
    /// 12 geometric load points from 1 to 400.
    let loads = (0..<12).map { pow(400.0, Double($0) / 11) }

    func usl(_ n: Double, _ s: Double, _ k: Double, _ l: Double) -> Double {
        l * n / (1 + s * (n - 1) + k * n * (n - 1))
    }

    @Test func recoversExactParameters() throws {
        let t = Self.truth
        let fit = try #require(USLFit.fit(load: loads, throughput: loads.map { usl($0, t.sigma, t.kappa, t.lambda) }))
        #expect(abs(fit.sigma - t.sigma) / t.sigma < 0.03)
        #expect(abs(fit.kappa - t.kappa) / t.kappa < 0.03)
        #expect(abs(fit.lambda - t.lambda) / t.lambda < 0.03)
        let peak = try #require(fit.peakLoad)
        #expect(abs(peak - 99) < 1)
        let peakX = try #require(fit.peakThroughput)
        #expect(abs(peakX - usl(((1 - t.sigma) / t.kappa).squareRoot(), t.sigma, t.kappa, t.lambda)) < 0.01)
        #expect(fit.rSquared > 0.999)
        #expect(fit.points == 12)
        #expect(abs(fit.throughput(at: 50) - usl(50, t.sigma, t.kappa, t.lambda)) < 1e-3)
    }

    @Test func intervalsCoverTruthWithNoise() throws {
        let t = Self.truth
        var rng = NoiseSource(state: 2024)
        let y = loads.map { usl($0, t.sigma, t.kappa, t.lambda) * (1 + 0.02 * rng.unit()) }
        let fit = try #require(USLFit.fit(load: loads, throughput: y))
        #expect(fit.sigmaInterval.low <= t.sigma && t.sigma <= fit.sigmaInterval.high)
        #expect(fit.kappaInterval.low <= t.kappa && t.kappa <= fit.kappaInterval.high)
        #expect(fit.lambdaInterval.low <= t.lambda && t.lambda <= fit.lambdaInterval.high)
        #expect(fit.sigmaStandardError > 0 && fit.kappaStandardError > 0 && fit.lambdaStandardError > 0)
        #expect(fit.kappaInterval.high - fit.kappaInterval.low < t.kappa)
    }

    @Test func largeLoadScale() throws {
        // Send rates of 100…5000/s used as N; κ is tiny.
        let n = (0..<10).map { 100 * pow(50.0, Double($0) / 9) }
        let (s, k, l) = (0.05, 2e-8, 0.98)
        let fit = try #require(USLFit.fit(load: n, throughput: n.map { usl($0, s, k, l) }))
        #expect(abs(fit.sigma - s) / s < 0.03)
        #expect(abs(fit.kappa - k) / k < 0.03)
        #expect(abs(fit.lambda - l) / l < 0.03)
    }

    @Test func linearDataHasNoPeak() throws {
        let fit = try #require(USLFit.fit(load: loads, throughput: loads.map { 2.5 * $0 }))
        #expect(fit.kappa < 1e-9)
        #expect(fit.sigma < 1e-6)
        #expect(abs(fit.lambda - 2.5) < 1e-6)
        #expect(fit.peakLoad == nil)
        #expect(fit.peakThroughput == nil)
    }

    @Test func rejectsUnsupportedData() {
        #expect(USLFit.fit(load: [1, 2, 3], throughput: [1, 2, 3]) == nil)
        #expect(USLFit.fit(load: [1, 2, 3, 4, 5], throughput: [1, 2, .nan, 4, 5]) == nil)
        #expect(USLFit.fit(load: [1, 2, .infinity, 4, 5], throughput: [1, 2, 3, 4, 5]) == nil)
        #expect(USLFit.fit(load: [1, 1, 2, 2, 3], throughput: [1, 1, 2, 2, 3]) == nil)
        // Pure noise around a constant: R² far below 0.8.
        var rng = NoiseSource(state: 5)
        let n = (1...12).map(Double.init)
        #expect(USLFit.fit(load: n, throughput: n.map { _ in 10 + rng.unit() }) == nil)
    }

    @Test func codableRoundTrip() throws {
        let fit = try #require(USLFit.fit(load: loads, throughput: loads.map { usl($0, 0.02, 0.0001, 1) }))
        let back = try JSONDecoder().decode(USLFit.self, from: JSONEncoder().encode(fit))
        #expect(back == fit)
    }
}
