import Foundation
import Hummingbird
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PushFleetServerSupport
import PushFleetTestSupport
import ServiceLifecycle
import Synchronization
import Testing

import PushFleetClients

/// The fleet's own HTTP pool against a real Hummingbird server on a loopback port.
@Suite("Fleet HTTP client")
struct FleetHTTPClientTests {
    /// Counts requests in progress on the server side, and the most seen at once.
    final class InFlight: Sendable {
        let state = Mutex((now: 0, most: 0))
        func enter() { state.withLock { $0.now += 1; $0.most = max($0.most, $0.now) } }
        func leave() { state.withLock { $0.now -= 1 } }
        var most: Int { state.withLock { $0.most } }
    }

    /// Knows the caller's address, to check which source address a connection came from.
    struct AddressContext: RequestContext, RemoteAddressRequestContext {
        var coreContext: CoreRequestContextStorage
        let remoteAddress: SocketAddress?

        init(source: ApplicationRequestContextSource) {
            coreContext = .init(source: source)
            remoteAddress = source.channel.remoteAddress
        }
    }

    static func withServer(_ body: @escaping @Sendable (Int, InFlight) async throws -> Void) async throws {
        let inFlight = InFlight()
        let router = Router(context: AddressContext.self)
        router.get("whoami") { _, context -> String in context.remoteAddress?.ipAddress ?? "?" }
        router.post("echo") { request, _ -> Response in
            inFlight.enter()
            defer { inFlight.leave() }
            let bytes = try await request.body.collect(upTo: 1 << 20)
            try await Task.sleep(for: .milliseconds(2))
            return Response(status: .ok, body: .init(byteBuffer: bytes))
        }
        router.get("slow") { _, _ -> String in
            try await Task.sleep(for: .seconds(2))
            return "late"
        }
        router.get("close") { _, _ -> Response in
            Response(status: .ok, headers: [.connection: "close"], body: .init(byteBuffer: ByteBuffer(string: "bye")))
        }
        router.get("streamed") { _, _ -> Response in
            // No length: Hummingbird answers chunked.
            Response(
                status: .ok,
                body: .init { writer in
                    for index in 0..<50 { try await writer.write(ByteBuffer(string: "part\(index);")) }
                    try await writer.finish(nil)
                }
            )
        }
        let bound = Readiness<ListenAddress>()
        var logger = Logger(label: "client-test")
        logger.logLevel = .critical
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { bound.succeed(ListenAddress(host: "127.0.0.1", port: $0.localAddress?.port ?? 0)) }, logger: logger
        )
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        let server = Task { try await group.run() }
        defer { server.cancel() }
        let port = try await bound.value().port
        try await body(port, inFlight)
        await group.triggerGracefulShutdown()
    }

    @Test("300 concurrent POSTs through a pool of 4 each get their own body back, never more than 4 at once")
    func poolLimit() async throws {
        try await Self.withServer { port, inFlight in
            let client = FleetHTTPClient(host: "127.0.0.1", port: port, maxConnections: 4, group: MultiThreadedEventLoopGroup.singleton)
            let mismatches = await withTaskGroup(of: Int.self) { group in
                for index in 0..<300 {
                    group.addTask {
                        let body = ByteBuffer(string: "request-\(index)-" + String(repeating: "x", count: index * 10))
                        // The wait for one of the 4 connections is inside the timeout: a bound that only catches a hang.
                        guard let answer = try? await client.execute(.POST, "/echo", body: body, timeout: .seconds(120)) else { return 1 }
                        return answer.status == 200 && answer.body == body ? 0 : 1
                    }
                }
                return await group.reduce(0, +)
            }
            await client.shutdown()
            #expect(mismatches == 0)
            // The cap is the pool's promise. How many were in flight at once beyond one depends on
            // how fast a loaded machine schedules the 300 tasks (under the fuzzers' build, once, one).
            #expect(inFlight.most <= 4 && inFlight.most >= 1)
        }
    }

    @Test("a timeout fails only its request; closed and chunked answers are read whole; the pool goes on")
    func failures() async throws {
        try await Self.withServer { port, _ in
            let client = FleetHTTPClient(host: "127.0.0.1", port: port, maxConnections: 2, group: MultiThreadedEventLoopGroup.singleton)
            // The answer would come after 2 s and succeed; only the timeout makes this throw. The
            // others' timeouts only bound a hang (the suite runs beside other builds).
            await #expect(throws: FleetHTTPError.timeout) { try await client.execute(.GET, "/slow", timeout: .milliseconds(200)) }
            for _ in 0..<3 {
                let closing = try await client.execute(.GET, "/close", timeout: .seconds(60))
                #expect(closing.status == 200 && String(buffer: closing.body) == "bye")
            }
            let streamed = try await client.execute(.GET, "/streamed", timeout: .seconds(60))
            #expect(String(buffer: streamed.body) == (0..<50).map { "part\($0);" }.joined())
            let missing = try await client.execute(.GET, "/nowhere", timeout: .seconds(60))
            #expect(missing.status == 404)
            await client.shutdown()
            await #expect(throws: FleetHTTPError.shutDown) { try await client.execute(.GET, "/close", timeout: .seconds(5)) }
        }
    }

    @Test("connections bind to the given source addresses in turn")
    func sourceAddresses() async throws {
        try await Self.withServer { port, _ in
            let sources = try ["127.0.0.2", "127.0.0.3"].map { try SocketAddress(ipAddress: $0, port: 0) }
            let client = FleetHTTPClient(
                host: "127.0.0.1", port: port, maxConnections: 4, group: MultiThreadedEventLoopGroup.singleton, sourceAddresses: sources
            )
            let seen = await withTaskGroup(of: String.self) { group in
                for _ in 0..<40 {
                    // The wait for one of the 4 connections is inside the timeout: a bound that only catches a hang.
                    group.addTask { (try? await client.execute(.GET, "/whoami", timeout: .seconds(120))).map { String(buffer: $0.body) } ?? "failed" }
                }
                return await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            await client.shutdown()
            #expect(seen == ["127.0.0.2", "127.0.0.3"])
        }
    }

    @Test("nothing listening is a connect error, labelled as such")
    func refused() async throws {
        // A port bound but not listening refuses connections, and no other test's server can
        // take it meanwhile (a closed port could be).
        let reserved = try #require(RawSocket.boundNotListening())
        defer { reserved.close() }
        let port = reserved.port
        let backend = BackendClient(baseURL: "http://127.0.0.1:\(port)", connections: 2)
        // A refusal is at once; the timeout is only past any wait of a suite starving a loaded
        // machine's threads (a refusal read after the deadline is labelled a timeout).
        let result = await backend.exchange(.GET, "/", authorization: nil, timeout: .seconds(300))
        guard case .failure(let error) = result else {
            Issue.record("a request to a closed port succeeded")
            return
        }
        #expect(error.label == "connect")
        await backend.shutdown()
    }
}

/// A server that answers the first request on each connection and closes the connection,
/// unanswered, on the second: as a server does that lets idle keep-alive connections go.
enum ForgetfulServer {
    static func start() async throws -> (any Channel, Int) {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Connection())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return (channel, channel.localAddress?.port ?? 0)
    }

    final class Connection: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        private var requests = 0

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            requests += 1
            guard requests == 1 else {
                context.close(promise: nil)
                return
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: "2")
            context.write(wrapOutboundOut(.head(.init(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "ok")))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}

@Suite("Fleet HTTP client, idle connections")
struct StaleConnectionTests {
    @Test("a reused connection the server let go is retried once for GET and PUT, never for POST")
    func stale() async throws {
        let (server, port) = try await ForgetfulServer.start()
        let client = FleetHTTPClient(host: "127.0.0.1", port: port, maxConnections: 1, group: MultiThreadedEventLoopGroup.singleton)
        for method in [HTTPMethod.GET, .PUT, .GET] {
            // Only a hang's bound: the answer is a close or a response, never the timer. (CI's
            // loaded machine once starved the suite's threads past a 30 s deadline.)
            let answer = try await client.execute(method, "/", timeout: .seconds(300))
            #expect(answer.status == 200 && String(buffer: answer.body) == "ok")
        }
        await #expect(throws: FleetHTTPError.connectionClosed) {
            try await client.execute(.POST, "/", body: ByteBuffer(string: "{}"), timeout: .seconds(300))
        }
        await client.shutdown()
        try await server.close()
    }
}

/// A server that lets a connection go once it has been idle a second: a request that comes
/// later on it is closed unanswered, as when the server's idle timer wins the race with it.
/// `announces`: each answer says so (`Keep-Alive: timeout=1`).
enum IdleClosingServer {
    /// Connections accepted.
    final class Accepted: Sendable {
        let count = Mutex(0)
    }

    static func start(announces: Bool) async throws -> (any Channel, Int, Accepted) {
        let connections = Accepted()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                connections.count.withLock { $0 += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Connection(announces: announces))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return (channel, channel.localAddress?.port ?? 0, connections)
    }

    final class Connection: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let announces: Bool
        private var answered: NIODeadline?

        init(announces: Bool) { self.announces = announces }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            if let answered, NIODeadline.now() - answered >= .seconds(1) {
                context.close(promise: nil)
                return
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: "2")
            if announces { headers.add(name: "Keep-Alive", value: "timeout=1, max=100") }
            context.write(wrapOutboundOut(.head(.init(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "ok")))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            answered = .now()
        }
    }
}

@Suite("Fleet HTTP client, idle limit")
struct IdleLimitTests {
    @Test(
        "a connection idle past what its server announced, or past the pool's idle limit, is closed unused: the POST after it takes a new one and succeeds"
    )
    func idleLimit() async throws {
        for announces in [true, false] {
            let (server, port, connections) = try await IdleClosingServer.start(announces: announces)
            // Announced: 1 s, kept 0.5 s. Not announced: the pool's own limit, here 0.5 s.
            let client = FleetHTTPClient(
                host: "127.0.0.1", port: port, maxConnections: 1, group: MultiThreadedEventLoopGroup.singleton,
                idleLimit: announces ? nil : .milliseconds(500))
            let first = try await client.execute(.POST, "/", body: ByteBuffer(string: "{}"), timeout: .seconds(300))
            #expect(first.status == 200)
            // Past both the client's limit and the server's second, however long a loaded
            // machine holds the test up: the first connection is never used again. (That a
            // fresh connection is reused is timing's business here, and other tests'.)
            try await Task.sleep(for: .milliseconds(1_200))
            let second = try await client.execute(.POST, "/", body: ByteBuffer(string: "{}"), timeout: .seconds(300))
            #expect(second.status == 200 && String(buffer: second.body) == "ok")
            #expect(connections.count.withLock { $0 } == 2, "announced: \(announces)")
            await client.shutdown()
            try await server.close()
        }
    }
}
