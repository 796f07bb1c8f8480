import ArgumentParser
import Foundation
import Logging
import PushFleetBackend
import PushFleetCore
import PushFleetEmbedded
import PushFleetHub
import PushFleetMockPush
import PushFleetServerSupport
import PushFleetTraces
import PushFleetWire

/// `pushfleet serve`'s flags to the servers' configuration. Each step checks its own flags; the
/// steps run in a fixed order, so the first problem reported stays the same.
extension Serve {
    struct Parsed {
        var configuration: EmbeddedSystem.Configuration
        var logLevel: Logger.Level
        /// Where the servers' spans go; nil: they record none.
        var otlp: OTLPConfiguration?
    }

    func parsed() throws -> Parsed {
        var backend = try backendConfiguration()
        let limits = try serverLimits()
        backend.server = limits
        let pushService = try pushServiceConfiguration()
        try checkExternalPushService()
        let pushListen = try Self.address(pnsListen, "pns-listen")
        let h2Listen = try pnsH2Listen.map { try Self.address($0, "pns-h2-listen") }
        let token = try adminTokenSetting(pushListen: pushListen, h2Listen: h2Listen)
        let hubSettings = try embeddedHub(registrationTTL: backend.registrationTTL)
        let throughHub = try hubRoute(&backend)
        var pushServer = MockPushServer.Configuration(
            listen: pushListen,
            http2Listen: h2Listen,
            limits: limits,
            http2Limits: limits,
            adminToken: token,
            hub: hubSettings,
            tls: try tls.server(limits: limits, hubHost: hubSettings.namespaceHost),
            maxDeviceConnections: try deviceCap(limits)
        )
        pushServer.gatewayPing = try Self.duration(gatewayPing, "gateway-ping")
        guard Scenario.Keepalive.range.contains(pushServer.gatewayPing) else { throw ValidationError("--gateway-ping must be between 100ms and 1h") }
        let level = try logLevelSetting()
        let otlp = try otlpConfiguration()
        var configuration = EmbeddedSystem.Configuration(backend: backend, pushService: pushService, pushServer: pushServer, externalPushServiceURL: pnsUrl)
        configuration.throughHub = throughHub
        return Parsed(configuration: configuration, logLevel: level, otlp: otlp)
    }

    /// The backend's listener, lifetimes, store, token secret and users; its server limits come later.
    private func backendConfiguration() throws -> BackendConfiguration {
        var backend = BackendConfiguration(listen: try Self.address(backendListen, "backend-listen"))
        backend.registrationTTL = try Self.lifetime(registrationTtl, "registration-ttl")
        switch StoreLocation.parse(store) {
        case .success(let location): backend.store = location
        case .failure(let error): throw ValidationError("--store: \(error)")
        }
        backend.notificationTTL = try Self.lifetime(notificationTtl, "notification-ttl")
        backend.tokenLifetime = try Self.lifetime(tokenTtl, "token-ttl")
        if let secret = tokenSecret ?? ProcessInfo.processInfo.environment["PUSHFLEET_TOKEN_SECRET"] {
            // An HS256 key is at least the hash's size (RFC 7518 §3.2).
            guard secret.utf8.count >= 32 else { throw ValidationError("the token secret must be at least 32 bytes (HS256 keys are at least the hash's size, RFC 7518 §3.2)") }
            backend.tokenSecret = Data(secret.utf8)
        }
        if let users = try userDirectory() { backend.users = users }
        return backend
    }

    /// The users of --users-file, or nil for the demo rule.
    private func userDirectory() throws -> UserDirectory? {
        guard let usersFile else { return nil }
        let contents: String
        do { contents = try String(contentsOfFile: usersFile, encoding: .utf8) } catch {
            throw ValidationError("--users-file: cannot read \(usersFile): \(error.localizedDescription)")
        }
        do { return try UserDirectory(fileContents: contents) } catch {
            throw ValidationError("--users-file \(usersFile): \(error)")
        }
    }

    /// Timeouts and the connection cap, shared by every listener.
    private func serverLimits() throws -> ServerLimits {
        var limits = ServerLimits(
            idleTimeout: try Self.duration(idleTimeout, "idle-timeout"),
            headerTimeout: try Self.duration(headerTimeout, "header-timeout"),
            bodyTimeout: try Self.duration(bodyTimeout, "body-timeout")
        )
        if let maxConnections { limits.maxConnections = maxConnections }
        let problems = limits.problems()
        guard problems.isEmpty else { throw ValidationError(problems.joined(separator: "; ")) }
        return limits
    }

    /// --max-device-connections, in range and below --max-connections when both are given.
    private func deviceCap(_ limits: ServerLimits) throws -> Int? {
        guard let maxDeviceConnections else { return nil }
        guard ServerLimits.connectionRange.contains(maxDeviceConnections) else {
            throw ValidationError("--max-device-connections must be between 1 and \(ServerLimits.connectionRange.upperBound), got \(maxDeviceConnections)")
        }
        if let total = limits.maxConnections, maxDeviceConnections >= total {
            throw ValidationError("--max-device-connections \(maxDeviceConnections) must be below --max-connections \(total): providers and admin need the rest")
        }
        return maxDeviceConnections
    }

    /// The embedded push service's faults at start and the provider credentials it accepts.
    private func pushServiceConfiguration() throws -> PushService.Configuration {
        var pushService = PushService.Configuration()
        if let faults {
            pushService.faults = try Self.faultSettings(faults)
        }
        pushService.providerAuth = try tls.providerAuth()
        return pushService
    }

    private func checkExternalPushService() throws {
        guard let pnsUrl else { return }
        guard let url = URL(string: pnsUrl), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            throw ValidationError("--pns-url must be an http(s) URL, got '\(pnsUrl)'")
        }
    }

    /// The token /admin requires, or nil when it is open; open only on loopback listeners.
    private func adminTokenSetting(pushListen: ListenAddress, h2Listen: ListenAddress?) throws -> String? {
        switch adminAuth {
        case "on":
            guard let adminToken else { return MockPushServer.randomToken() }
            guard adminToken.utf8.count >= 16, adminToken.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "," }) else {
                throw ValidationError("--admin-token must be at least 16 printable ASCII characters without spaces")
            }
            return adminToken
        case "off":
            guard adminToken == nil else { throw ValidationError("--admin-token makes no sense with --admin-auth off") }
            let tlsListen = try tls.pnsTlsListen.map { try Self.address($0, "pns-tls-listen") }
            guard ([pushListen] + [h2Listen, tlsListen].compactMap { $0 }).allSatisfy(\.isLoopback) else {
                throw ValidationError("--admin-auth off needs the push service on loopback only (--pns-listen 127.0.0.1:PORT)")
            }
            return nil
        default:
            throw ValidationError("--admin-auth must be on or off, got '\(adminAuth)'")
        }
    }

    /// The hub the push service serves, whether or not the backend sends through it.
    private func embeddedHub(registrationTTL: Duration) throws -> NotificationHub.Settings {
        var settings = NotificationHub.Settings(namespace: hubNamespace, hubName: hubName ?? "pushfleet", registrationTTL: registrationTTL)
        if let hubKey { settings.rules[0].key = hubKey }
        let problems = settings.problems()
        guard problems.isEmpty else { throw ValidationError("hub: " + problems.joined(separator: "; ")) }
        return settings
    }

    /// Whether the backend sends through the embedded hub; a hub named by --hub's connection
    /// string is set on `backend` instead.
    private func hubRoute(_ backend: inout BackendConfiguration) throws -> Bool {
        switch hub {
        case nil:
            return false
        case "embedded"?:
            guard pnsUrl == nil else { throw ValidationError("--hub embedded needs the embedded push service (no --pns-url)") }
            return true
        case let text?:
            do { backend.hub = try HubConnectionString(parsing: text) } catch { throw ValidationError("--hub: \(error)") }
            if backend.hub?.entityPath == nil {
                // The portal's access-policy strings name no hub; it is given apart, as clients take it.
                guard let hubName else { throw ValidationError("--hub: the connection string names no hub: give --hub-name <hub name>, or add ;EntityPath=<hub name>") }
                backend.hub?.entityPath = hubName
            }
            return false
        }
    }

    private func logLevelSetting() throws -> Logger.Level {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return level
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

    private static func address(_ text: String, _ flag: String) throws -> ListenAddress {
        do { return try ListenAddress(parsing: text) } catch { throw ValidationError("--\(flag): \(error)") }
    }

    private static func duration(_ text: String, _ flag: String) throws -> Duration {
        do {
            let value = try DurationText.parse(text)
            guard value > .zero else { throw ValidationError("--\(flag) must be longer than 0") }
            return value
        } catch let error as DurationText.ParseError { throw ValidationError("--\(flag): \(error)") }
    }

    private static func lifetime(_ text: String, _ flag: String) throws -> Duration {
        let value = try duration(text, flag)
        guard Scenario.EmbeddedOptions.lifetimeRange.contains(value) else { throw ValidationError("--\(flag) must be between 1s and 3650d") }
        return value
    }
}
