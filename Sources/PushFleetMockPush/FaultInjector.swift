import Foundation
import PushFleetCore
import PushFleetWire
import Synchronization

/// Draws the faults of ``FaultSettings`` from one seeded generator.
final class FaultInjector: Sendable {
    private struct State {
        var settings: FaultSettings
        var unregistered: Set<String>
        var rng: SplitMix64
        var queue: ServiceQueue?
    }

    /// What happens to one push, decided when it arrives.
    struct Decision {
        var unregistered: Bool
        var throttled: Bool
        var dropped: Bool
        var delay: Duration
        /// The wait for the service rate's server (zero without one).
        var served: Int64 = 0
    }

    private let state: Mutex<State>

    init(settings: FaultSettings) {
        state = Mutex(Self.state(settings))
    }

    private static func state(_ settings: FaultSettings) -> State {
        State(
            settings: settings, unregistered: Set(settings.unregisteredTokens), rng: SplitMix64(seed: settings.seed),
            queue: settings.serviceRate.map { ServiceQueue(rate: $0, capacity: settings.serviceQueue) }
        )
    }

    var settings: FaultSettings {
        state.withLock { $0.settings }
    }

    /// Replaces the settings; the generator restarts from the new seed.
    func replace(with settings: FaultSettings) {
        state.withLock { $0 = Self.state(settings) }
    }

    /// Decides a push arriving at `now`; with a service rate, a push that finds its queue full
    /// is throttled.
    func decide(token: String, at now: Int64) -> Decision {
        state.withLock { state in
            let settings = state.settings
            let unregistered =
                // Most runs name no token: no hash of one per push then.
                (!state.unregistered.isEmpty && state.unregistered.contains(token))
                || (settings.unregisteredRatio > 0
                    && Double(stableHash(token, seed: settings.seed) >> 11) * 0x1.0p-53 < settings.unregisteredRatio)
            var throttled = settings.throttle > 0 && state.rng.nextUnit() < settings.throttle
            var served: Int64 = 0
            if !throttled && !unregistered && state.queue != nil {
                if let wait = state.queue!.admit(at: now) { served = wait } else { throttled = true }
            }
            let dropped = settings.drop > 0 && state.rng.nextUnit() < settings.drop
            let delay = settings.latency.map { $0.draw { state.rng.nextUnit() } } ?? .zero
            return Decision(unregistered: unregistered, throttled: throttled, dropped: dropped, delay: delay, served: served)
        }
    }

    /// A uniform draw for choices outside a push (which devices a forced disconnect takes).
    func nextUnit() -> Double {
        state.withLock { $0.rng.nextUnit() }
    }
}
