/// A small, fast, seedable generator (Steele, Lea and Flood's SplitMix64).
///
/// Every random choice pushfleet makes goes through a seeded generator, so the same seed replays
/// the same run.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        self.state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform draw in [0, 1).
    public mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }
}

/// FNV-1a, a hash that is the same in every process (Swift's `Hasher` is seeded per process).
public func stableHash(_ text: some StringProtocol, seed: UInt64 = 0) -> UInt64 {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ seed
    for byte in text.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01B3
    }
    // Finish with a SplitMix step so that nearby inputs spread over the whole range.
    var mix = SplitMix64(seed: hash)
    return mix.next()
}
