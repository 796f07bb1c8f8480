import ArgumentParser
import Foundation
import Logging
import PushFleetBackend
import PushFleetCore
import PushFleetEmbedded
import PushFleetHub
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetWire
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
    @Option(help: "Close a keep-alive connection idle this long (WebSockets excepted).") var idleTimeout = "75s"
    @Option(help: "A new connection's first request head must arrive within this.") var headerTimeout = "60s"
    @Option(help: "Close a connection whose request body pauses this long.") var bodyTimeout = "60s"
    @Option(help: "Bearer token the push service's /admin API requires (default: random, printed at start).")
    var adminToken: String?
    @Option(help: "on, or off to leave /admin open: allowed only when the push service listens on loopback.")
    var adminAuth = "on"
    @Option(help: "The backend sends through a notification hub: 'embedded' (the one the push service serves) or a connection string with EntityPath.")
    var hub: String?
    @Option(help: "The embedded hub's namespace: {namespace}.servicebus.windows.net.") var hubNamespace = "pushfleet"
    @Option(help: "The embedded hub's name (its path: /{hub}/registrations, /{hub}/messages, …).") var hubName = "pushfleet"
    @Option(help: "The embedded hub's DefaultFullSharedAccessSignature key (default: random, printed at start).") var hubKey: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "info"
    @OptionGroup(title: "TLS and provider credentials") var tls: ServeTLSOptions

    func validate() throws {
        _ = try parsed()
    }

    private struct Parsed {
        var configuration: EmbeddedSystem.Configuration
        var logLevel: Logger.Level
    }

    private func parsed() throws -> Parsed {
        func address(_ text: String, _ flag: String) throws -> ListenAddress {
            do { return try ListenAddress(parsing: text) } catch { throw ValidationError("--\(flag): \(error)") }
        }
        func duration(_ text: String, _ flag: String) throws -> Duration {
            do {
                let value = try DurationText.parse(text)
                guard value > .zero else { throw ValidationError("--\(flag) must be longer than 0") }
                return value
            } catch let error as DurationText.ParseError { throw ValidationError("--\(flag): \(error)") }
        }
        func lifetime(_ text: String, _ flag: String) throws -> Duration {
            let value = try duration(text, flag)
            guard Scenario.EmbeddedOptions.lifetimeRange.contains(value) else { throw ValidationError("--\(flag) must be between 1s and 3650d") }
            return value
        }
        var backend = BackendConfiguration(listen: try address(backendListen, "backend-listen"))
        backend.registrationTTL = try lifetime(registrationTtl, "registration-ttl")
        switch StoreLocation.parse(store) {
        case .success(let location): backend.store = location
        case .failure(let error): throw ValidationError("--store: \(error)")
        }
        backend.notificationTTL = try lifetime(notificationTtl, "notification-ttl")
        backend.tokenLifetime = try lifetime(tokenTtl, "token-ttl")
        if let secret = tokenSecret ?? ProcessInfo.processInfo.environment["PUSHFLEET_TOKEN_SECRET"] {
            guard secret.utf8.count >= 16 else { throw ValidationError("the token secret must be at least 16 bytes") }
            backend.tokenSecret = Data(secret.utf8)
        }
        if let usersFile {
            let contents: String
            do { contents = try String(contentsOfFile: usersFile, encoding: .utf8) } catch {
                throw ValidationError("--users-file: cannot read \(usersFile): \(error.localizedDescription)")
            }
            do { backend.users = try UserDirectory(fileContents: contents) } catch {
                throw ValidationError("--users-file \(usersFile): \(error)")
            }
        }
        var limits = ServerLimits(
            idleTimeout: try duration(idleTimeout, "idle-timeout"),
            headerTimeout: try duration(headerTimeout, "header-timeout"),
            bodyTimeout: try duration(bodyTimeout, "body-timeout")
        )
        if let maxConnections { limits.maxConnections = maxConnections }
        let problems = limits.problems()
        guard problems.isEmpty else { throw ValidationError(problems.joined(separator: "; ")) }
        backend.server = limits
        var pushService = PushService.Configuration()
        if let faults {
            pushService.faults = try Self.faultSettings(faults)
        }
        pushService.providerAuth = try tls.providerAuth()
        if let pnsUrl {
            guard let url = URL(string: pnsUrl), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ValidationError("--pns-url must be an http(s) URL, got '\(pnsUrl)'")
            }
        }
        let pushListen = try address(pnsListen, "pns-listen")
        let h2Listen = try pnsH2Listen.map { try address($0, "pns-h2-listen") }
        var token: String?
        switch adminAuth {
        case "on":
            if let adminToken {
                guard adminToken.utf8.count >= 16, adminToken.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "," }) else {
                    throw ValidationError("--admin-token must be at least 16 printable ASCII characters without spaces")
                }
                token = adminToken
            } else {
                token = MockPushServer.randomToken()
            }
        case "off":
            guard adminToken == nil else { throw ValidationError("--admin-token makes no sense with --admin-auth off") }
            let tlsListen = try tls.pnsTlsListen.map { try address($0, "pns-tls-listen") }
            guard ([pushListen] + [h2Listen, tlsListen].compactMap { $0 }).allSatisfy(\.isLoopback) else {
                throw ValidationError("--admin-auth off needs the push service on loopback only (--pns-listen 127.0.0.1:PORT)")
            }
        default:
            throw ValidationError("--admin-auth must be on or off, got '\(adminAuth)'")
        }
        var hubSettings = NotificationHub.Settings(namespace: hubNamespace, hubName: hubName, registrationTTL: backend.registrationTTL)
        if let hubKey { hubSettings.rules[0].key = hubKey }
        let hubProblems = hubSettings.problems()
        guard hubProblems.isEmpty else { throw ValidationError("hub: " + hubProblems.joined(separator: "; ")) }
        var throughHub = false
        switch hub {
        case nil: break
        case "embedded"?:
            guard pnsUrl == nil else { throw ValidationError("--hub embedded needs the embedded push service (no --pns-url)") }
            throughHub = true
        case let text?:
            do { backend.hub = try HubConnectionString(parsing: text) } catch { throw ValidationError("--hub: \(error)") }
            guard backend.hub?.entityPath != nil else { throw ValidationError("--hub: the connection string needs EntityPath=<hub name>") }
        }
        let pushServer = MockPushServer.Configuration(
            listen: pushListen,
            http2Listen: h2Listen,
            limits: limits,
            http2Limits: limits,
            adminToken: token,
            hub: hubSettings,
            tls: try tls.server(limits: limits)
        )
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var configuration = EmbeddedSystem.Configuration(backend: backend, pushService: pushService, pushServer: pushServer, externalPushServiceURL: pnsUrl)
        configuration.throughHub = throughHub
        return Parsed(configuration: configuration, logLevel: level)
    }

    static func faultSettings(_ text: String) throws -> FaultSettings {
        var json = text
        if text.hasPrefix("@") {
            let path = String(text.dropFirst())
            do { json = try String(contentsOfFile: path, encoding: .utf8) } catch {
                throw ValidationError("--faults: cannot read \(path): \(error.localizedDescription)")
            }
        }
        let settings: FaultSettings
        do { settings = try JSONDecoder().decode(FaultSettings.self, from: Data(json.utf8)) } catch {
            throw ValidationError("--faults: not valid fault settings JSON: \(error)")
        }
        let problems = settings.problems()
        guard problems.isEmpty else { throw ValidationError("--faults: " + problems.joined(separator: "; ")) }
        return settings
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
        let system = EmbeddedSystem(configuration: parsed.configuration)
        let group = ServiceGroup(
            configuration: .init(
                services: system.makeServices(logger: logger).map { .init(service: $0) },
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
                lines += ServeTLSOptions.instructions(url: url, names: identity.names, ca: authorityFiles?.ca, bundle: authorityFiles?.bundle)
            }
            lines.append("device gateway: \(endpoints.pushService.replacingOccurrences(of: "http", with: "ws"))/device")
            if pnsUrl == nil {
                lines.append(
                    parsed.configuration.pushServer.adminToken.map { "push admin token: \($0)  (Authorization: Bearer …, for /admin/*)" }
                        ?? "push admin: open (--admin-auth off)"
                )
                if let hub = parsed.configuration.pushServer.hub {
                    lines.append("notification hub: \(endpoints.pushService)/\(hub.hubName)  (namespace \(hub.namespaceHost))")
                    lines.append("hub connection string: \(hub.connectionString())")
                    lines.append("hub connection string (plain HTTP): \(hub.connectionString(endpoint: endpoints.pushService + "/"))")
                    lines.append("hub listen-only connection string: \(hub.connectionString(keyName: NotificationHub.Settings.listenKeyName))")
                }
            }
            if let through = system.configuration.backend.hub {
                lines.append("backend sends through hub \(through.entityPath ?? "") at \(system.configuration.backend.hubAtPushService ? endpoints.pushService : through.baseURL)")
            }
            FileHandleOutput.standardOutput(lines.joined(separator: "\n"))
        }
        defer { announcer.cancel() }
        try await group.run()
    }
}
