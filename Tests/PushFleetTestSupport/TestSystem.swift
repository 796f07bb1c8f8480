import Foundation
import Logging
import NIOHTTP1
import PushFleetBackend
package import PushFleetEmbedded
import PushFleetMockPush
package import PushFleetWire

/// The embedded backend and push service on ephemeral loopback ports, for one test.
package struct TestSystem: Sendable {
    package let backend: String
    package let pushService: String
    package let pushServiceHTTP2: String?
    /// The push service's admin token.
    package let adminToken: String?

    /// Calls to a backend and push service started otherwise (a backend of the test's own).
    package init(backend: String, pushService: String) {
        self.init(backend: backend, pushService: pushService, pushServiceHTTP2: nil, adminToken: nil)
    }

    private init(backend: String, pushService: String, pushServiceHTTP2: String?, adminToken: String?) {
        self.backend = backend
        self.pushService = pushService
        self.pushServiceHTTP2 = pushServiceHTTP2
        self.adminToken = adminToken
    }

    package static func run<T: Sendable>(
        _ configuration: EmbeddedSystem.Configuration = .init(),
        shutdownWithin: Duration = .seconds(5),
        _ body: @escaping @Sendable (TestSystem) async throws -> T
    ) async throws -> T {
        try await runEmbedded(configuration, shutdownWithin: shutdownWithin) { _, test in try await body(test) }
    }

    /// The same, with the running system at hand (to restart its backend, say).
    package static func runEmbedded<T: Sendable>(
        _ configuration: EmbeddedSystem.Configuration = .init(),
        shutdownWithin: Duration = .seconds(5),
        _ body: @escaping @Sendable (EmbeddedSystem, TestSystem) async throws -> T
    ) async throws -> T {
        var logger = Logger(label: "test-system")
        logger.logLevel = .warning
        return try await EmbeddedSystem.withRunning(configuration, logger: logger, shutdownWithin: shutdownWithin) { system, endpoints in
            try await body(
                system,
                TestSystem(
                    backend: endpoints.backend, pushService: endpoints.pushService, pushServiceHTTP2: endpoints.pushServiceHTTP2,
                    adminToken: system.pushServer?.configuration.adminToken
                )
            )
        }
    }

    // MARK: Backend calls, as the seed's client makes them

    /// `POST /api/register?handle=` then `PUT /api/register/{id}`; returns the id.
    package func register(
        _ user: String,
        platform: Platform,
        handle: String,
        tags: [String] = [],
        auth: TestAuth? = nil
    ) async throws -> String {
        let id = try await createRegistrationID(user, handle: handle, auth: auth)
        let put = try await updateRegistration(id, user, platform: platform.rawValue, handle: handle, tags: tags, auth: auth)
        guard put.status == 200 else { throw UnexpectedStatus(call: "PUT register", response: put) }
        return id
    }

    package func createRegistrationID(_ user: String, handle: String?, auth: TestAuth? = nil) async throws -> String {
        let query = handle.map { "?handle=\($0)" } ?? ""
        let response = try await TestHTTP.request(.POST, "\(backend)/api/register\(query)", auth: auth ?? .user(user))
        guard response.status == 200 else { throw UnexpectedStatus(call: "POST register", response: response) }
        return try response.json(String.self)
    }

    package func updateRegistration(
        _ id: String,
        _ user: String,
        platform: String,
        handle: String,
        tags: [String] = [],
        auth: TestAuth? = nil
    ) async throws -> TestResponse {
        try await TestHTTP.request(
            .PUT, "\(backend)/api/register/\(id)", auth: auth ?? .user(user),
            json: DeviceRegistration(platform: platform, handle: handle, tags: tags)
        )
    }

    /// Connects a device to the gateway and registers it for `user`.
    package func device(_ user: String, _ platform: Platform) async throws -> TestDevice {
        let device = try await TestDevice.connect(pushService: pushService, platform: platform)
        _ = try await register(user, platform: platform, handle: device.address!.token)
        return device
    }

    package func sendPlain(from user: String, to recipient: String, pns: String, message: String) async throws -> TestResponse {
        try await TestHTTP.request(
            .POST, "\(backend)/api/notifications?pns=\(pns)&to_tag=\(recipient)", auth: .user(user), json: message
        )
    }

    package func sendSecure(from user: String, to recipient: String, payload: String) async throws -> TestResponse {
        try await TestHTTP.request(.POST, "\(backend)/api/notifications/secure?to_tag=\(recipient)", auth: .user(user), json: payload)
    }

    package func fetch(_ id: String, as user: String) async throws -> TestResponse {
        try await TestHTTP.request(.GET, "\(backend)/api/notifications/\(id)", auth: .user(user))
    }

    // MARK: Push service admin

    package func setFaults(_ faults: FaultSettings) async throws {
        let response = try await TestHTTP.request(.PUT, "\(pushService)/admin/faults", auth: admin, json: faults)
        guard response.status == 200 else { throw UnexpectedStatus(call: "PUT faults", response: response) }
    }

    /// The admin API's credentials.
    package var admin: TestAuth? { adminToken.map { .bearer($0) } }

    package func pushStats() async throws -> PushServiceStats {
        try await TestHTTP.request(.GET, "\(pushService)/admin/stats", auth: admin).json(PushServiceStats.self)
    }

    /// The push service's counters once `condition` holds of them (a connection's end seen, say),
    /// or as they are at the timeout: a starved machine takes its time, a fixed sleep guesses it.
    package func pushStats(once condition: (PushServiceStats) -> Bool, timeout: Duration = .seconds(60)) async throws -> PushServiceStats {
        let deadline = ContinuousClock.now + timeout
        while true {
            let stats = try await pushStats()
            if condition(stats) || ContinuousClock.now >= deadline { return stats }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    package func backendStats() async throws -> BackendStats {
        try await TestHTTP.request(.GET, "\(backend)/stats").json(BackendStats.self)
    }

    /// A provider request straight to the push service's APNs endpoint.
    package func apnsPush(
        token: String,
        body: String = #"{"aps":{"alert":"hi"}}"#,
        headers: [(String, String)] = [],
        base: String? = nil
    ) async throws -> TestResponse {
        let defaults = [("authorization", TestCredentials.apnsAuthorization), ("apns-topic", "com.example.app")]
        let names = Set(headers.map { $0.0.lowercased() })
        return try await TestHTTP.request(
            .POST, "\(base ?? pushService)/3/device/\(token)", body: Data(body.utf8),
            headers: defaults.filter { !names.contains($0.0) } + headers
        )
    }
}

package struct UnexpectedStatus: Error, CustomStringConvertible {
    package var call: String
    package var response: TestResponse
    package var description: String { "\(call) answered \(response.status): \(response.text)" }

    package init(call: String, response: TestResponse) {
        self.call = call
        self.response = response
    }
}

extension PushFrame {
    /// The provider body parsed as a JSON object.
    package var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
    }
}
