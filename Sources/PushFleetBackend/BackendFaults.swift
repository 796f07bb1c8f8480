import Hummingbird
public import PushFleetWire
import PushFleetCore
import Synchronization

/// Latency the embedded backend adds to its own answers, for fault scenarios ("slow fetches"):
/// sends are the `POST`s under `/api/notifications`, fetches the `GET`s. Shared by every backend
/// built from one configuration, so it survives a restart.
public final class BackendFaults: BackendLatencyControl {
    private struct State {
        var settings = BackendLatency()
        var rng: SplitMix64
        var queue: ServiceQueue?
    }

    private let state: Mutex<State>
    /// Lets requests skip the lock while nothing is injected.
    private let active = Atomic<Bool>(false)

    public init(seed: UInt64 = 1) {
        state = Mutex(State(rng: SplitMix64(seed: seed)))
    }

    public var latency: BackendLatency { state.withLock { $0.settings } }

    /// Whether any latency or send rate is injected now.
    var isActive: Bool { active.load(ordering: .relaxed) }

    /// Draws are clamped to 0…1h whatever the settings say (``BackendLatency/problems``).
    public func replace(with settings: BackendLatency) {
        state.withLock {
            $0.settings = settings
            $0.queue = settings.sendRate.map { ServiceQueue(rate: $0, capacity: settings.sendQueue) }
        }
        active.store(settings.send != nil || settings.fetch != nil || settings.sendRate != nil, ordering: .relaxed)
    }

    /// What is done to a request before its route: nothing, a wait, or a refusal because the
    /// send rate's queue is full.
    enum Treatment: Equatable {
        case pass
        case wait(Duration)
        case refuse
    }

    func treatment(for request: Request, now: Int64 = MonotonicClock.nanoseconds()) -> Treatment {
        guard active.load(ordering: .relaxed), request.uri.path.hasPrefix("/api/notifications") else { return .pass }
        return state.withLock { state in
            let isSend = request.method == .post
            var wait = Duration.zero
            if isSend, state.queue != nil {
                guard let served = state.queue!.admit(at: now) else { return .refuse }
                wait = .nanoseconds(served)
            }
            let latency = request.method == .get ? state.settings.fetch : isSend ? state.settings.send : nil
            if let latency { wait += latency.draw { state.rng.nextUnit() } }
            return wait > .zero ? .wait(wait) : .pass
        }
    }
}

/// Applies ``BackendFaults`` before a request reaches its route.
struct InjectedLatencyMiddleware<Context: RequestContext>: RouterMiddleware {
    let faults: BackendFaults

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        switch faults.treatment(for: request) {
        case .pass: break
        case .wait(let delay): try await Task.sleep(for: delay)
        case .refuse:
            throw HTTPError(.serviceUnavailable, headers: [.retryAfter: "1"], message: "the backend's send queue is full (its send rate is limited)")
        }
        return try await next(request, context)
    }
}
