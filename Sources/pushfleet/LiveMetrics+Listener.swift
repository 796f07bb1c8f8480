#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import Logging
import NIOCore
import PushFleetMetrics
import PushFleetServerSupport
import ServiceLifecycle

extension LiveMetrics {
    /// A server answering `GET /metrics` in the Prometheus text format, or in OpenMetrics with
    /// exemplars to a scraper that asks for it. `bound` learns the address it listens on, or why
    /// it never will (a ``ListenError`` naming the flag).
    func makeService(listen: ListenAddress, bound: Readiness<ListenAddress>, logger: Logger) -> any Service {
        let router = Router()
        router.get("/metrics") { request, _ in
            if Self.wantsOpenMetrics(request.headers[values: .accept]) {
                return Response.bytes(self.openMetricsExposition(), contentType: "application/openmetrics-text; version=1.0.0; charset=utf-8")
            }
            return Response.bytes(self.exposition(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
        let application = Application(
            router: router, configuration: .init(address: .hostname(listen.host, port: listen.port), serverName: "pushfleet-metrics"),
            onServerRunning: { bound.succeed(ListenAddress(host: listen.host, port: $0.localAddress?.port ?? listen.port)) }, logger: logger
        )
        return ListenerService(application: application, flag: "--metrics-listen", listen: listen, bound: bound)
    }
}

/// A listener of the run's (`--metrics-listen`, `--live`) could not be served: the flag, the
/// address, and why, instead of the socket call's own words.
struct ListenError: Error, CustomStringConvertible {
    var flag: String
    var listen: ListenAddress
    var underlying: any Error

    var description: String {
        let reason: String
        if let error = underlying as? IOError {
            reason = String(cString: strerror(error.errnoCode)).lowercased()
        } else {
            reason = "\(underlying)"
        }
        let hint = (underlying as? IOError)?.errnoCode == EADDRINUSE ? "; another process holds it: pick another port, or 0 for any free one" : ""
        return "\(flag) \(listen.host):\(listen.port): cannot listen on port \(listen.port) (\(reason))\(hint)"
    }
}

/// Fails `bound` when the server stops, so a run waiting for its address is not left waiting.
struct ListenerService<Server: Service>: Service {
    let application: Server
    let flag: String
    let listen: ListenAddress
    let bound: Readiness<ListenAddress>

    func run() async throws {
        do {
            try await application.run()
            bound.fail(ServerStoppedError())
        } catch {
            let named = ListenError(flag: flag, listen: listen, underlying: error)
            bound.fail(named)
            throw named
        }
    }
}
