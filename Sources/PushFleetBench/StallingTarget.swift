import Hummingbird
import Logging
import PushFleetCore
import PushFleetServerSupport
import ServiceLifecycle
import Synchronization

/// A target that answers every send at once, except during a stall of `stall` at the start of
/// each `period`, when it holds every request until the stall ends.
final class StallingTarget: Sendable {
    let period: Duration
    let stall: Duration
    private let origin = Mutex<Int64>(MonotonicClock.nanoseconds())

    init(period: Duration, stall: Duration) {
        self.period = period
        self.stall = stall
    }

    /// Starts the stall schedule now (when traffic starts), half a period in.
    func align() {
        origin.withLock { $0 = MonotonicClock.nanoseconds() - period.nanoseconds / 2 }
    }

    func makeService(bound: Readiness<ListenAddress>, logger: Logger) -> any Service {
        let router = Router()
        let period = self.period.nanoseconds
        let stall = self.stall.nanoseconds
        router.post("/api/notifications") { _, _ -> Response in
            let elapsed = MonotonicClock.nanoseconds() - self.origin.withLock { $0 }
            let phase = elapsed % period
            if phase < stall { try await Task.sleep(for: .nanoseconds(stall - phase)) }
            return Response(status: .ok)
        }
        return Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0), backlog: 4096),
            onServerRunning: { bound.succeed(ListenAddress(host: "127.0.0.1", port: $0.localAddress?.port ?? 0)) }, logger: logger
        )
    }
}
