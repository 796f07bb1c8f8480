import PushFleetCore

/// A set of platforms as one byte of flags, for records a run keeps by the million.
enum PlatformSet {
    static func flag(_ platform: Scenario.PlatformName) -> UInt8 {
        UInt8(1) << UInt8(Scenario.PlatformName.allCases.firstIndex(of: platform) ?? 0)
    }

    static func flags(_ platforms: [Scenario.PlatformName]) -> UInt8 {
        platforms.reduce(0) { $0 | flag($1) }
    }

    /// The members in declaration order; one shared array per set, so reading allocates nothing.
    static func members(_ flags: UInt8) -> [Scenario.PlatformName] {
        let index = Int(flags)
        return index < lists.count ? lists[index] : Scenario.PlatformName.allCases.filter { flags & flag($0) != 0 }
    }

    private static let lists: [[Scenario.PlatformName]] = (0..<(1 << Scenario.PlatformName.allCases.count)).map { flags in
        Scenario.PlatformName.allCases.filter { UInt8(flags) & flag($0) != 0 }
    }
}
