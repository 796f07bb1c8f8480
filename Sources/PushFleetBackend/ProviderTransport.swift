import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOPosix
import PushFleetClients
import Synchronization

/// A provider request, relative to the push service's base URL.
struct ProviderPost: Sendable {
    /// The path and query under the base URL.
    var path: String
    var headers: [(String, String)]
    var body: ByteBuffer
}

/// Carries provider requests to the push service: over the project's own HTTP/1.1 pool
/// (`FleetHTTPClient`) when the push service speaks plain HTTP, as in the embedded system, else
/// over AsyncHTTPClient (TLS, an `https` base URL). The pool costs ~19 µs of CPU per request
/// where AsyncHTTPClient costs ~70 (`bench http`), and the backend makes one per device a push
/// reaches (docs/performance.md).
final class ProviderTransport: Sendable {
    private let client: HTTPClient
    private let maxConnections: Int
    /// The plain pool of the base URL seen last; pools of earlier base URLs (a push service that
    /// moved) are kept until shutdown to be closed then.
    private let pools = Mutex<(current: (base: String, pool: FleetHTTPClient)?, retired: [FleetHTTPClient])>((nil, []))

    init(client: HTTPClient, maxConnections: Int) {
        self.client = client
        self.maxConnections = max(1, maxConnections)
    }

    /// The answer's status and body (up to 64 KiB, which the refusals fit in).
    func post(_ post: ProviderPost, base: String, timeout: Duration) async throws -> (status: Int, body: ByteBuffer) {
        if let pool = plainPool(for: base) {
            let answer = try await pool.execute(.POST, post.path, headers: post.headers, body: post.body, timeout: timeout)
            return (answer.status, answer.body)
        }
        var request = HTTPClientRequest(url: base + post.path)
        request.method = .POST
        for (name, value) in post.headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(post.body)
        let response = try await client.execute(request, timeout: .nanoseconds(timeout.nanosecondCount))
        // Read the body (which also returns the connection to the pool): some refusals are told
        // apart only by their reason.
        return (Int(response.status.code), try await response.body.collect(upTo: 64 * 1024))
    }

    /// The base URL the last request went to, when its pool is the project's own.
    var currentPlainBase: String? {
        pools.withLock { $0.current?.base }
    }

    /// Starts `post` at once on an idle connection of the plain pool for `base`, preferring
    /// `loop`'s, with no task; `done` gets the status and body on the connection's loop. False
    /// (nothing sent) when `base` has no plain pool yet or none of its connections is idle.
    func startIfIdle(
        _ post: ProviderPost, base: String, timeout: Duration, preferring loop: any EventLoop,
        done: @escaping @Sendable (Result<(status: Int, body: ByteBuffer), any Error>) -> Void
    ) throws -> Bool {
        guard let pool = pools.withLock({ $0.current?.base == base ? $0.current?.pool : nil }) else { return false }
        return try pool.startIfIdle(.POST, post.path, headers: post.headers, body: post.body, timeout: timeout, preferring: loop) { result in
            done(result.map { ($0.status, $0.body) })
        }
    }

    /// The plain-HTTP pool for `base`; nil for any other scheme, or a base URL with a path.
    private func plainPool(for base: String) -> FleetHTTPClient? {
        pools.withLock { pools in
            if let current = pools.current, current.base == base { return current.pool }
            guard base.hasPrefix("http://"), let origin = Origin(base), Self.isOrigin(base) else { return nil }
            let pool = FleetHTTPClient(host: origin.host, port: origin.port, maxConnections: maxConnections, group: MultiThreadedEventLoopGroup.singleton)
            if let current = pools.current { pools.retired.append(current.pool) }
            pools.current = (base, pool)
            return pool
        }
    }

    /// `http://host[:port]` with nothing after the authority: the pool's requests carry the
    /// path alone.
    private static func isOrigin(_ base: String) -> Bool {
        !base.dropFirst("http://".count).contains { $0 == "/" || $0 == "?" || $0 == "#" || $0 == "@" }
    }

    func shutdown() async {
        let all = pools.withLock { pools in (pools.current.map { [$0.pool] } ?? []) + pools.retired }
        for pool in all { await pool.shutdown() }
    }
}
