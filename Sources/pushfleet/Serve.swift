import ArgumentParser
import Foundation
import Logging
import NIOPosix
import PushFleetBackend
import PushFleetEmbedded
import PushFleetHub
import PushFleetWebPush
import PushFleetLauncher
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetCore
import PushFleetTraces
import ServiceLifecycle
import UnixSignals

enum UserDirectoryLine {
    static func make(user: String, password: String) -> String { UserDirectory.line(user: user, password: password) }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the reference backend and the mock push service until SIGINT or SIGTERM.",
        discussion: """
            The backend sends to the embedded push service, or to --pns-url when given (the embedded \
            one is then not started). Use port 0 for any free port; the bound addresses are printed.
            """
    )

    @Option(help: "Where the backend listens (HOST:PORT).") var backendListen = "127.0.0.1:8080"
    @Option(help: "Where the mock push service listens: provider endpoints, admin, device gateway.")
    var pnsListen = "127.0.0.1:8090"
    @Option(help: "Also serve the provider endpoints over HTTP/2 cleartext (prior knowledge) here.")
    var pnsH2Listen: String?
    @Option(help: "Send to this push service instead of starting the embedded one.") var pnsUrl: String?
    @Option(help: "Users file (user:sha256:SALT:HEX lines); default is the demo rule user == password.")
    var usersFile: String?
    @Option(help: "Where the backend keeps registrations and notifications: memory, sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DB.")
    var store = "memory"
    @Option(help: "Lifetime of a registration id after its last update (e.g. 24h, 90s).") var registrationTtl = "24h"
    @Option(help: "How long secure and rich notifications stay readable.") var notificationTtl = "24h"
    @Option(help: "Lifetime of a login token.") var tokenTtl = "1h"
    @Option(help: "Secret for signing login tokens (default: PUSHFLEET_TOKEN_SECRET, else random per start).")
    var tokenSecret: String?
    @Option(help: "Push-service faults at start: JSON, or @FILE holding JSON (see docs/mock-push.md).")
    var faults: String?
    @Option(help: "Connections each port serves at once; more wait in the backlog (default: the open-files limit less 64).")
    var maxConnections: Int?
    @Option(help: "Device WebSockets the push service holds at once; more get 503 (default: its connection cap less a reserve for providers).")
    var maxDeviceConnections: Int?
    @Option(help: "How often the gateway pings each device socket; one ping left unanswered for a whole period closes it (100ms to 1h).")
    var gatewayPing = "30s"
    @Option(help: "Close a keep-alive connection idle this long (WebSockets excepted).") var idleTimeout = "75s"
    @Option(help: "A new connection's first request head must arrive within this.") var headerTimeout = "60s"
    @Option(help: "Close a connection whose request body pauses this long.") var bodyTimeout = "60s"
    @Option(help: "Bearer token the push service's /admin API requires (default: random, printed at start).")
    var adminToken: String?
    @Option(help: "on, or off to leave /admin open: allowed only when the push service listens on loopback.")
    var adminAuth = "on"
    @Option(help: "The backend sends through a notification hub: 'embedded' (the one the push service serves) or a connection string (the hub named by its EntityPath, else by --hub-name).")
    var hub: String?
    @Option(help: "The embedded hub's namespace: {namespace}.servicebus.windows.net.") var hubNamespace = "pushfleet"
    @Option(help: "The embedded hub's name (its path: /{hub}/registrations, /{hub}/messages, …; default pushfleet), and the hub --hub's connection string sends to when it has no EntityPath.")
    var hubName: String?
    @Option(help: "The embedded hub's DefaultFullSharedAccessSignature key (default: random, printed at start).") var hubKey: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "info"
    @Option(
        help: """
            Event loops the servers run on (1 to 1024; default: one for every two cores, which leaves the rest to a fleet \
            beside them and keeps a push's hops on fewer threads). Give a serve on a machine of its own the cores.
            """
    )
    var eventLoops: Int?
    @Option(
        help: """
            Export the backend's and the hub's spans with OTLP/HTTP to this collector (http://HOST:4318), every second, \
            under callers that sampled their trace; the OTEL_EXPORTER_OTLP_* variables are read when it is not given.
            """
    )
    var otlpEndpoint: String?
    @OptionGroup(title: "TLS and provider credentials") var tls: ServeTLSOptions

    func validate() throws {
        if let eventLoops, !ServerEventLoops.range.contains(eventLoops) {
            throw ValidationError("--event-loops must be between 1 and \(ServerEventLoops.range.upperBound), got \(eventLoops)")
        }
        _ = try parsed()
    }

    func run() async throws {
        // Before parsing: the default connection cap follows the raised open-files limit.
        _ = FileLimit.raise()
        let parsed = try parsed()
        var logger = Logger(label: "pushfleet.serve")
        logger.logLevel = parsed.logLevel
        do {
            try await ReferenceBackend.checkStore(parsed.configuration.backend)
        } catch {
            throw ValidationError("--store \(parsed.configuration.backend.store): \(error)")
        }
        var authorityFiles: (ca: String, bundle: String)?
        if let identity = parsed.configuration.pushServer.tls?.identity, identity.authorityPEM != nil {
            authorityFiles = try ServeTLSOptions.writeAuthority(identity, to: tls.caPath)
        }
        var configuration = parsed.configuration
        var services: [any Service] = []
        if let otlp = parsed.otlp {
            let spans = ServerSpans()
            configuration.backend.spans = spans.backend
            configuration.pushServer.hubSpans = spans.hub
            let stream = SpanStream(recorders: spans.all, exporter: OTLPExporter(configuration: otlp), scope: (name: "pushfleet", version: PushFleet.version))
            services.append(SpanExportService(stream: stream))
        }
        let system = EmbeddedSystem(configuration: configuration)
        services += system.makeServices(logger: logger)
        let group = ServiceGroup(
            configuration: .init(
                services: services.map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        let announcer = Task {
            guard let endpoints = try? await system.endpoints() else { return }
            var lines = [
                "backend:      \(endpoints.backend)  (store: \(parsed.configuration.backend.store))", "push service: \(endpoints.pushService)",
            ]
            if let h2 = endpoints.pushServiceHTTP2 { lines.append("push h2c:     \(h2)") }
            if let url = endpoints.pushServiceTLS, let identity = parsed.configuration.pushServer.tls?.identity {
                lines += ServeTLSOptions.instructions(
                    url: url, names: identity.names, hubHost: parsed.configuration.pushServer.hub?.namespaceHost, ca: authorityFiles?.ca,
                    bundle: authorityFiles?.bundle
                )
            }
            lines.append("device gateway: \(endpoints.pushService.replacingOccurrences(of: "http", with: "ws"))/device")
            // Counted from the group itself: what the loops are, not what was asked.
            lines.append("event loops: \(MultiThreadedEventLoopGroup.singleton.makeIterator().reduce(0) { count, _ in count + 1 })")
            lines += system.connectionCaps()
            if pnsUrl == nil {
                lines.append(
                    parsed.configuration.pushServer.adminToken.map { "push admin token: \($0)  (Authorization: Bearer …, for /admin/*)" }
                        ?? "push admin: open (--admin-auth off)"
                )
                if let hub = parsed.configuration.pushServer.hub {
                    lines.append("notification hub: \(endpoints.pushService)/\(hub.hubName)  (namespace \(hub.namespaceHost))")
                    // As the portal shows a hub's access policies: the hub's name apart from the strings.
                    lines.append("hub name: \(hub.hubName)")
                    lines.append("hub connection string: \(hub.connectionString().withoutEntityPath)")
                    lines.append("hub connection string (plain HTTP): \(hub.connectionString(endpoint: endpoints.pushService + "/").withoutEntityPath)")
                    lines.append(
                        "hub listen-only connection string: \(hub.connectionString(keyName: NotificationHub.Settings.listenKeyName).withoutEntityPath)"
                    )
                    let browser = system.configuration.pushServer.hub?.browserCredential ?? hub.browserCredential
                    lines.append("hub browser credential: VAPID public key \(browser.applicationServerKey), subject \(browser.subject)")
                }
            }
            if let through = system.configuration.backend.hub {
                lines.append("backend sends through hub \(through.entityPath ?? "") at \(system.configuration.backend.hubAtPushService ? endpoints.pushService : through.baseURL)")
            }
            FileHandleOutput.standardOutput(lines.joined(separator: "\n"))
        }
        if let otlp = parsed.otlp {
            FileHandleOutput.standardError("traces: the backend's and the hub's spans go to \(otlp.endpoint) every second")
        }
        defer { announcer.cancel() }
        try await group.run()
    }
}
