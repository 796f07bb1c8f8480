import ArgumentParser
import Foundation
import Logging
import PushFleetBackend
import PushFleetCore
import PushFleetEmbedded
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
    @Option(help: "Lifetime of a registration id after its last update (e.g. 24h, 90s).") var registrationTtl = "24h"
    @Option(help: "How long secure and rich notifications stay readable.") var notificationTtl = "24h"
    @Option(help: "Lifetime of a login token.") var tokenTtl = "1h"
    @Option(help: "Secret for signing login tokens (default: PUSHFLEET_TOKEN_SECRET, else random per start).")
    var tokenSecret: String?
    @Option(help: "Push-service faults at start: JSON, or @FILE holding JSON (see docs/mock-push.md).")
    var faults: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "info"

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
        var backend = BackendConfiguration(listen: try address(backendListen, "backend-listen"))
        backend.registrationTTL = try duration(registrationTtl, "registration-ttl")
        backend.notificationTTL = try duration(notificationTtl, "notification-ttl")
        backend.tokenLifetime = try duration(tokenTtl, "token-ttl")
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
        var pushService = PushService.Configuration()
        if let faults {
            pushService.faults = try Self.faultSettings(faults)
        }
        if let pnsUrl {
            guard let url = URL(string: pnsUrl), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ValidationError("--pns-url must be an http(s) URL, got '\(pnsUrl)'")
            }
        }
        let pushServer = MockPushServer.Configuration(
            listen: try address(pnsListen, "pns-listen"),
            http2Listen: try pnsH2Listen.map { try address($0, "pns-h2-listen") }
        )
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return Parsed(
            configuration: .init(backend: backend, pushService: pushService, pushServer: pushServer, externalPushServiceURL: pnsUrl),
            logLevel: level
        )
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
        let parsed = try parsed()
        _ = FileLimit.raise()
        var logger = Logger(label: "pushfleet.serve")
        logger.logLevel = parsed.logLevel
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
            var lines = ["backend:      \(endpoints.backend)", "push service: \(endpoints.pushService)"]
            if let h2 = endpoints.pushServiceHTTP2 { lines.append("push h2c:     \(h2)") }
            lines.append("device gateway: \(endpoints.pushService.replacingOccurrences(of: "http", with: "ws"))/device")
            FileHandleOutput.standardOutput(lines.joined(separator: "\n"))
        }
        defer { announcer.cancel() }
        try await group.run()
    }
}
