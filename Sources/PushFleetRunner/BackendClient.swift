import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PushFleetCore

/// One HTTP exchange with the backend, timed on the monotonic clock.
struct HTTPExchange: Sendable {
    var status: Int
    var body: ByteBuffer
    var start: Int64
    var end: Int64

    var latency: Int64 { end - start }
    var succeeded: Bool { (200..<300).contains(status) }
    var text: String { String(buffer: body) }
}

/// Why an exchange produced no answer; the label is a bounded error class.
struct TransportError: Error, Sendable {
    var label: String
    var start: Int64
    var end: Int64
}

/// The device and sender side of the backend contract, over a pooled AsyncHTTPClient.
struct BackendClient: Sendable {
    let client: HTTPClient
    let baseURL: String

    static func makeHTTPClient(connections: Int) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(120), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
        configuration.timeout = .init(connect: .seconds(10))
        configuration.decompression = .disabled
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    func exchange(
        _ method: HTTPMethod,
        _ path: String,
        authorization: String?,
        body: Data? = nil,
        contentType: String = "application/json",
        timeout: Duration
    ) async -> Result<HTTPExchange, TransportError> {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        if let authorization { request.headers.add(name: "Authorization", value: authorization) }
        if let body {
            request.headers.add(name: "Content-Type", value: contentType)
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let start = MonotonicClock.nanoseconds()
        do {
            let response = try await client.execute(request, timeout: .nanoseconds(timeout.nanoseconds))
            let buffer = try await response.body.collect(upTo: 8 * 1024 * 1024)
            return .success(HTTPExchange(status: Int(response.status.code), body: buffer, start: start, end: MonotonicClock.nanoseconds()))
        } catch {
            return .failure(TransportError(label: Self.label(for: error), start: start, end: MonotonicClock.nanoseconds()))
        }
    }

    static func label(for error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout: return "timeout"
            case .remoteConnectionClosed: return "connection_closed"
            case .cancelled: return "cancelled"
            default: return "http_client:\(error.shortDescription)"
            }
        }
        if error is CancellationError { return "cancelled" }
        if error is NIOCore.IOError || String(describing: error).contains("connect") { return "connect" }
        return "io"
    }

    static func basic(_ user: String, password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }
}

/// The fleet's request path in a closed loop, for measuring its cost (`pushfleet bench http`).
public enum HTTPLoad {
    /// GETs `path` on `baseURL` from `connections` concurrent loops for `duration`, through the
    /// same pooled client devices and senders use; returns how many answers came back.
    public static func run(baseURL: String, path: String, connections: Int, duration: Duration) async -> Int {
        let client = BackendClient.makeHTTPClient(connections: connections)
        let backend = BackendClient(client: client, baseURL: baseURL)
        let deadline = MonotonicClock.nanoseconds() + duration.nanoseconds
        let count = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<connections {
                group.addTask {
                    var done = 0
                    while MonotonicClock.nanoseconds() < deadline {
                        if case .success = await backend.exchange(.GET, path, authorization: nil, timeout: .seconds(5)) { done += 1 }
                    }
                    return done
                }
            }
            return await group.reduce(0, +)
        }
        try? await client.shutdown()
        return count
    }
}
