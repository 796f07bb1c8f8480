import Logging
import PushFleetCore
public import PushFleetEngine
public import PushFleetResults
import Foundation
import PushFleetBackend
import PushFleetEmbedded
import PushFleetMockPush
import PushFleetServerSupport
import ServiceLifecycle

extension FleetRunner {
    /// The environment variable that gives an external push service's admin token.
    public static let pushAdminTokenVariable = "PUSHFLEET_PUSH_ADMIN_TOKEN"

    /// Starts what the scenario's target names — the embedded system, or an embedded push
    /// service beside an external backend — and plays the scenario against it, until its end or
    /// until `stop` says so.
    public func run(stop: StopControl = StopControl()) async throws -> RunResult {
        var logger = options.logger
        logger.logLevel = max(logger.logLevel, .warning)
        switch scenario.target {
        case .embedded:
            var configuration = EmbeddedSystem.Configuration()
            configuration.backend.registrationTTL = scenario.embedded.registrationTTL
            configuration.backend.store = scenario.embedded.store
            configuration.throughHub = scenario.embedded.hub
            configuration.backend.spans = options.serverSpans?.backend
            configuration.pushServer.hubSpans = options.serverSpans?.hub
            if let ping = scenario.network.gatewayPing { configuration.pushServer.gatewayPing = ping }
            // `sqlite:` with no path: a fresh file for this run only.
            var temporaryStore: URL?
            if case .sqlite(let path) = scenario.embedded.store, path.isEmpty {
                let url = FileManager.default.temporaryDirectory.appendingPathComponent("pushfleet-\(UUID().uuidString).sqlite")
                configuration.backend.store = .sqlite(path: url.path)
                temporaryStore = url
            }
            defer {
                if let temporaryStore {
                    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: temporaryStore.path + suffix) }
                }
            }
            if let credentials = scenario.fleet.names.credentials {
                configuration.backend.users = UserDirectory(passwords: credentials.map { ($0.user, $0.password) })
            }
            if let tls = scenario.embedded.tls {
                configuration.pushServer.tls = try EmbeddedSystem.tlsListener(listen: tls.listen, names: tls.names, caFile: tls.caFile)
                configuration.backendUsesTLS = true
            }
            let latency = configuration.backend.faults
            return try await EmbeddedSystem.withRunning(configuration, logger: logger) { system, endpoints in
                try await run(
                    against: SystemUnderTest(
                        backend: endpoints.backend, pushService: endpoints.pushService,
                        pushServiceListeners: [endpoints.pushServiceHTTP2, endpoints.pushServiceTLS].compactMap(\.self),
                        pushAdminToken: system.pushServer?.configuration.adminToken,
                        restartBackend: { down in try await system.restartBackend(downFor: down) }, backendLatency: latency,
                        pushWatch: system.pushServer?.service
                    ),
                    stop: stop
                )
            }
        case .external(let backend, .url(let pushService)):
            // A `serve` with its admin token: faults and the push service's load readings need it.
            let token = ProcessInfo.processInfo.environment[FleetRunner.pushAdminTokenVariable].flatMap { $0.isEmpty ? nil : $0 }
            return try await run(against: SystemUnderTest(backend: backend, pushService: pushService, pushAdminToken: token), stop: stop)
        case .external(let backend, .embedded(let listen)):
            let tls = try scenario.embedded.tls.map { try EmbeddedSystem.tlsListener(listen: $0.listen, names: $0.names, caFile: $0.caFile) }
            var pushConfiguration = MockPushServer.Configuration(listen: try .init(parsing: listen), tls: tls)
            if let ping = scenario.network.gatewayPing { pushConfiguration.gatewayPing = ping }
            let server = MockPushServer(service: PushService(), configuration: pushConfiguration)
            return try await withServices(server.makeServices(logger: logger), logger: logger) {
                let pushService = try await server.bound.value().httpURL
                let tlsURL = tls == nil ? nil : "https://\(try await server.boundTLS.value().authority)"
                return try await run(
                    against: SystemUnderTest(
                        backend: backend, pushService: pushService, pushServiceListeners: tlsURL.map { [$0] } ?? [],
                        pushAdminToken: server.configuration.adminToken, pushWatch: server.service
                    ),
                    stop: stop
                )
            }
        }
    }
}
