import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import PushFleetClients
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
            (FleetHTTPError.connect("refused"), "connect"),
            (FleetHTTPError.bodyTooLarge, "body_too_large"),
            (FleetHTTPError.shutDown, "cancelled"),
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
}
