import AsyncHTTPClient
package import Foundation
package import NIOCore
package import NIOHTTP1
import NIOPosix
package import PushFleetCore

/// One HTTP exchange with the backend, timed on the monotonic clock.
package struct HTTPExchange: Sendable {
    package var status: Int
    package var body: ByteBuffer
    package var start: Int64
    package var end: Int64
    package var fields: AnswerFields

    package init(status: Int, body: ByteBuffer, start: Int64, end: Int64, headers: HTTPHeaders = [:]) {
        self.init(status: status, body: body, start: start, end: end, fields: AnswerFields(headers))
    }

    package init(status: Int, body: ByteBuffer, start: Int64, end: Int64, fields: AnswerFields) {
        self.status = status
        self.body = body
        self.start = start
        self.end = end
        self.fields = fields
    }

    /// The answer's header fields, made from its bytes on each read.
    package var headers: HTTPHeaders { fields.headers }

    package var latency: Int64 { end - start }
    package var succeeded: Bool { (200..<300).contains(status) }
    package var text: String { String(buffer: body) }
}

/// Why an exchange produced no answer; the label is a bounded error class.
package struct TransportError: Error, Sendable {
    package var label: String
    package var start: Int64
    package var end: Int64
}

/// The device and sender side of the backend contract. Plain http goes through the lean
/// `FleetHTTPClient` pool; https through AsyncHTTPClient.
package struct BackendClient: Sendable {
    /// One reference, so a device that holds its own client (or none) stays one word.
    private final class Storage: Sendable {
        let baseURL: String
        let transport: Transport
        /// Times every exchange: the run's clock, so a fleet on a manual clock is timed on it.
        let clock: any RunClock

        init(baseURL: String, transport: Transport, clock: any RunClock) {
            self.baseURL = baseURL
            self.transport = transport
            self.clock = clock
        }
    }

    private enum Transport: Sendable {
        case pool(FleetHTTPClient)
        case tls(HTTPClient)
    }

    private let storage: Storage
    package var baseURL: String { storage.baseURL }
    private var transport: Transport { storage.transport }
    private var clock: any RunClock { storage.clock }

    package init(
        baseURL: String, connections: Int, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        sourceAddresses: [SocketAddress] = [], clock: any RunClock = .system
    ) {
        let transport: Transport
        if baseURL.hasPrefix("http://"), let origin = Origin(baseURL) {
            transport = .pool(
                FleetHTTPClient(host: origin.host, port: origin.port, maxConnections: connections, group: group, sourceAddresses: sourceAddresses)
            )
        } else {
            var configuration = HTTPClient.Configuration()
            configuration.connectionPool = .init(idleTimeout: .seconds(120), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
            configuration.timeout = .init(connect: .seconds(10))
            configuration.decompression = .disabled
            transport = .tls(HTTPClient(eventLoopGroup: group, configuration: configuration))
        }
        storage = Storage(baseURL: baseURL, transport: transport, clock: clock)
    }

    package func shutdown() async {
        switch transport {
        case .pool(let pool): await pool.shutdown()
        case .tls(let client): try? await client.shutdown()
        }
    }

    package func exchange(
        _ method: HTTPMethod,
        _ path: String,
        authorization: String?,
        body: Data? = nil,
        contentType: String = "application/json",
        timeout: Duration
    ) async -> Result<HTTPExchange, TransportError> {
        var headers: [(String, String)] = []
        if let authorization { headers.append(("Authorization", authorization)) }
        if body != nil { headers.append(("Content-Type", contentType)) }
        return await exchange(method, path, headers: headers, body: body.map { ByteBuffer(bytes: $0) }, timeout: timeout)
    }

    /// One request with the headers given (the pool adds Host and Content-Length).
    package func exchange(
        _ method: HTTPMethod, _ path: String, headers: [(String, String)], body: ByteBuffer?, timeout: Duration
    ) async -> Result<HTTPExchange, TransportError> {
        let start = clock.now()
        do {
            switch transport {
            case .pool(let pool):
                let answer = try await pool.execute(method, path, headers: headers, body: body, timeout: timeout)
                return .success(HTTPExchange(status: answer.status, body: answer.body, start: start, end: clock.now(), fields: answer.fields))
            case .tls(let client):
                var request = HTTPClientRequest(url: baseURL + path)
                request.method = method
                for (name, value) in headers { request.headers.add(name: name, value: value) }
                if let body { request.body = .bytes(body) }
                let response = try await client.execute(request, timeout: .nanoseconds(timeout.nanoseconds))
                let buffer = try await response.body.collect(upTo: 8 * 1024 * 1024)
                return .success(
                    HTTPExchange(status: Int(response.status.code), body: buffer, start: start, end: clock.now(), headers: response.headers)
                )
            }
        } catch {
            return .failure(TransportError(label: Self.label(for: error), start: start, end: clock.now()))
        }
    }

    /// The error class of a failed exchange or connection, by the type of what the fleet's
    /// clients throw: the pool's and the gateway socket's own errors, AsyncHTTPClient's, and NIO's
    /// from connecting.
    package static func label(for error: any Error) -> String {
        switch error {
        case let error as FleetHTTPError:
            switch error {
            case .timeout: "timeout"
            case .connectionClosed, .staleConnection, .closedBeforeSending: "connection_closed"
            case .connect: "connect"
            case .bodyTooLarge: "body_too_large"
            case .shutDown: "cancelled"
            case .invalidRequest: "invalid_request"
            case .malformedAnswer: "malformed_answer"
            }
        case let error as GatewaySocketError:
            switch error {
            case .timeout: "timeout"
            case .closed: "connection_closed"
            case .refused(let status): "refused_\(status)"
            case .atCapacity: "at_capacity"
            }
        case let error as HTTPClientError:
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout: "timeout"
            case .remoteConnectionClosed: "connection_closed"
            case .cancelled: "cancelled"
            default: "http_client:\(error.shortDescription)"
            }
        case is CancellationError: "cancelled"
        // Every address was tried and refused or reset; a name that did not resolve is not that.
        case let error as NIOConnectionError:
            error.dnsAError == nil && error.dnsAAAAError == nil && !error.connectionErrors.isEmpty ? "connect" : "io"
        // A socket call failed: connecting, binding the source address, or the connection reset.
        case is IOError: "connect"
        default: "io"
        }
    }

    package static func basic(_ user: String, password: String) -> String {
        "Basic " + Base64.encode("\(user):\(password)")
    }
}

/// The fleet's request path in a closed loop, for measuring its cost (`pushfleet bench http`).
public enum HTTPLoad {
    /// GETs `path` on `baseURL` from `connections` concurrent loops for `duration`, through the
    /// client devices and senders use, with one event loop thread; returns how many answers came
    /// back. `onEventLoop` runs the loops on that thread too (as `wrk -t1` does, and as a run's
    /// sends and push fetches do); otherwise they run on Swift's pool, as device setup does.
    public static func run(baseURL: String, path: String, connections: Int, duration: Duration, onEventLoop: Bool = true) async -> Int {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let executor: (any TaskExecutor)? = onEventLoop ? EventLoopExecutor(group.next()) : nil
        let backend = BackendClient(baseURL: baseURL, connections: connections, group: group)
        let deadline = MonotonicClock.nanoseconds() + duration.nanoseconds
        let count = await withTaskGroup(of: Int.self) { tasks in
            for _ in 0..<connections {
                tasks.addTask(executorPreference: executor) {
                    var done = 0
                    while MonotonicClock.nanoseconds() < deadline {
                        if case .success = await backend.exchange(.GET, path, authorization: nil, timeout: .seconds(5)) { done += 1 }
                    }
                    return done
                }
            }
            return await tasks.reduce(0, +)
        }
        await backend.shutdown()
        try? await group.shutdownGracefully()
        return count
    }
}
