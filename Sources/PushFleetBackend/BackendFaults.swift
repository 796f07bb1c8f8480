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
    }

    private let state: Mutex<State>
    /// Lets requests skip the lock while nothing is injected.
    private let active = Atomic<Bool>(false)

    public init(seed: UInt64 = 1) {
        state = Mutex(State(rng: SplitMix64(seed: seed)))
    }

    public var latency: BackendLatency { state.withLock { $0.settings } }

    /// Draws are clamped to 0…1h whatever the settings say (``BackendLatency/problems``).
    public func replace(with settings: BackendLatency) {
        state.withLock { $0.settings = settings }
        active.store(settings.send != nil || settings.fetch != nil, ordering: .relaxed)
    }

    func delay(for request: Request) -> Duration? {
        guard active.load(ordering: .relaxed), request.uri.path.hasPrefix("/api/notifications") else { return nil }
        return state.withLock { state in
            let latency = request.method == .get ? state.settings.fetch : request.method == .post ? state.settings.send : nil
            return latency?.draw { state.rng.nextUnit() }
        }
    }
}

/// Applies ``BackendFaults`` before a request reaches its route.
struct InjectedLatencyMiddleware<Context: RequestContext>: RouterMiddleware {
    let faults: BackendFaults

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let delay = faults.delay(for: request), delay > .zero { try await Task.sleep(for: delay) }
        return try await next(request, context)
    }
}
