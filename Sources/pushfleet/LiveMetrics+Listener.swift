import Hummingbird
import Logging
import PushFleetMetrics
import PushFleetServerSupport
import ServiceLifecycle

extension LiveMetrics {
    /// A server answering `GET /metrics` in the Prometheus text format. `bound` learns the
    /// address it listens on, or why it never will.
    func makeService(listen: ListenAddress, bound: Readiness<ListenAddress>, logger: Logger) -> any Service {
        let router = Router()
        router.get("/metrics") { _, _ in
            Response.bytes(self.exposition(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
        let application = Application(
            router: router, configuration: .init(address: .hostname(listen.host, port: listen.port), serverName: "pushfleet-metrics"),
            onServerRunning: { bound.succeed(ListenAddress(host: listen.host, port: $0.localAddress?.port ?? listen.port)) }, logger: logger
        )
        return MetricsListener(application: application, bound: bound)
    }
}

/// Fails `bound` when the server stops, so a run waiting for its address is not left waiting.
private struct MetricsListener<Server: Service>: Service {
    let application: Server
    let bound: Readiness<ListenAddress>

    func run() async throws {
        do {
            try await application.run()
            bound.fail(ServerStoppedError())
        } catch {
            bound.fail(error)
            throw error
        }
    }
}
