import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import PushFleetBackend
import PushFleetClients
import PushFleetCore
import PushFleetEmbedded
@testable import PushFleetEngine
import PushFleetMetrics
import PushFleetResults
import PushFleetScenario
import PushFleetTestSupport
import Testing

/// The error class a failed exchange or connection is counted under comes from the error's type.
@Suite("Error labels")
struct ErrorLabelTests {
    /// An error of no type the clients throw, whose text happens to name a connection.
    struct Unrelated: Error, CustomStringConvertible {
        var description: String { "could not connect" }
    }

    @Test("the clients' own errors, AsyncHTTPClient's, NIO's and cancellation map to their classes; text plays no part")
    func byType() {
        let cases: [(any Error, String)] = [
            (FleetHTTPError.timeout, "timeout"),
            (FleetHTTPError.connectionClosed, "connection_closed"),
            (FleetHTTPError.staleConnection, "connection_closed"),
            (FleetHTTPError.closedBeforeSending, "connection_closed"),
            (FleetHTTPError.connect("refused"), "connect"),
            (FleetHTTPError.bodyTooLarge, "body_too_large"),
            (FleetHTTPError.shutDown, "cancelled"),
            (FleetHTTPError.invalidRequest("header X has a control character"), "invalid_request"),
            (FleetHTTPError.malformedAnswer("not an HTTP/1.x status line"), "malformed_answer"),
            (GatewaySocketError.timeout, "timeout"),
            (GatewaySocketError.closed, "connection_closed"),
            (GatewaySocketError.refused(403), "refused_403"),
            (HTTPClientError.deadlineExceeded, "timeout"),
            (HTTPClientError.readTimeout, "timeout"),
            (HTTPClientError.connectTimeout, "timeout"),
            (HTTPClientError.remoteConnectionClosed, "connection_closed"),
            (HTTPClientError.cancelled, "cancelled"),
            (HTTPClientError.invalidURL, "http_client:\(HTTPClientError.invalidURL.shortDescription)"),
            (CancellationError(), "cancelled"),
            (IOError(errnoCode: ECONNRESET, reason: "read"), "connect"),
            (ChannelError.connectTimeout(.seconds(1)), "io"),
            (ChannelError.ioOnClosedChannel, "io"),
            (Unrelated(), "io"),
        ]
        for (error, label) in cases {
            #expect(BackendClient.label(for: error) == label, "\(error)")
        }
    }

    @Test("a refused connection, as NIO reports it once every address failed, is connect")
    func refusedConnection() async throws {
        // Bound but not listening: refuses, and no other test's server can take the port meanwhile.
        let reserved = try #require(RawSocket.boundNotListening())
        defer { reserved.close() }
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: reserved.port).get()
            try await channel.close()
            Issue.record("a port bound but not listening accepted a connection")
        } catch {
            #expect(error is NIOConnectionError, "\(error)")
            #expect(BackendClient.label(for: error) == "connect", "\(error)")
        }
    }

    @Test("a store failure the answer names is carried into the label; any other text is not")
    func answerReason() {
        let full = #"{"error":{"message":"the store has no space left: sqlite:/x","reason":"store_full"}}"#
        let cases: [(String, String)] = [
            (full, "register.post:status_507:store_full"),
            (#"{"reason":"store_unreachable"}"#, "register.post:status_507:store_unreachable"),
            (#"  {"error":{"reason":"store_limit"}}"#, "register.post:status_507:store_limit"),
            (#"{"error":{"reason":"disk_on_fire_\#(UUID().uuidString)"}}"#, "register.post:status_507"),
            (#"{"error":{"message":"store_full"}}"#, "register.post:status_507"),
            (#"{"error":{"reason":["store_full"]}}"#, "register.post:status_507"),
            ("store_full", "register.post:status_507"),
            ("", "register.post:status_507"),
            (full + String(repeating: " ", count: 5000), "register.post:status_507"),
        ]
        for (body, label) in cases {
            #expect(ErrorClass.status("register.post", 507, answer: Array(body.utf8)).label == label, "\(body.prefix(80))")
        }
    }

    @Test("a run against a backend whose store is full says so: the register errors carry status and reason")
    func runAgainstFullStore() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.storeLimits = StoreLimits(maxRegistrations: 2)
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let result = try await FleetRunTests.run(FleetRunTests.scenario(backend: system.backend, pushService: system.pushService, deadline: "2s"))
            let classes = result.errors.map(\.errorClass)
            #expect(classes.contains { $0.hasPrefix("register") && $0.hasSuffix(":status_507:store_limit") }, "\(classes)")
            #expect(!classes.contains { $0.hasSuffix(":status_507") }, "\(classes)")
        }
    }

    @Test("a login whose answer lacks the token: errors name the step and the value, a marker the pointer and what the answer held")
    func loginMissingValue() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            // The reference backend answers {"token",…}; this description looks for /access_token.
            let api = APIPresets.appBackend(auth: .token)
                .replacingOccurrences(of: "extract: { token: /token }", with: "extract: { token: /access_token }")
            #expect(api.contains("/access_token"))
            let yaml = """
                name: missing-token
                seed: 3
                target: { backend: "\(system.backend)", pns: "\(system.pushService)" }
                fleet: { users: 2, devices_per_user: 1, platforms: { apns: 1 } }
                lifecycle: [login, register, connect, receive]
                traffic: [{ kind: plain, platforms: [apns], rate: 2/s, duration: 1s }]
                deadline: 1s
                grace: 200ms
                api:
                \(api.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }.joined(separator: "\n"))
                """
            let result = try await FleetRunTests.run(yaml)
            let classes = result.errors.map(\.errorClass)
            #expect(classes.contains("login:missing_value:token"), "\(classes)")
            let markers = result.markers.map(\.label).filter { $0.contains("has no token") }
            #expect(markers.count == 1, "\(result.markers.map(\.label))")
            #expect(markers.first?.hasPrefix("login: the answer (200) has no token at json /access_token; it held: {\"") == true, "\(markers)")
            #expect(markers.first?.contains("\"token\"") == true, "\(markers)")
        }
    }
}
