/// Steps keyed by platform: a backend with one endpoint (and one body) per platform.
///
/// The choice of a platform's requests is made once, where a device of that platform is set up
/// or a sender starts (``on(_:)``), never per request: what a device or a call runs afterwards is
/// an ordinary step with the platform's requests as its own.
extension APIStep {
    /// The step names its requests per platform.
    public var isPlatformKeyed: Bool { !variants.isEmpty }

    /// A send makes one call per targeted platform: `per_platform: true`, or requests per platform.
    public var callsPerPlatform: Bool { perPlatform || isPlatformKeyed }

    /// The platforms the step has requests for: every one, unless it is keyed by platform.
    public var platforms: [Scenario.PlatformName] {
        isPlatformKeyed ? Scenario.PlatformName.allCases.filter { variants[$0] != nil } : Scenario.PlatformName.allCases
    }

    /// The step as a device, or a send's call, on `platform` makes it: that platform's own
    /// requests, or the shared ones; nil when the step is keyed by platform and does not name it.
    public func on(_ platform: Scenario.PlatformName) -> APIStep? {
        isPlatformKeyed ? variants[platform] : self
    }

    /// Every request the step may make, whatever the platform (shared ones first, then each
    /// platform's in the order apns, fcm, wns, webpush).
    public var allRequests: [APIRequest] {
        requests + Scenario.PlatformName.allCases.flatMap { variants[$0]?.requests ?? [] }
    }
}
