import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing

import PushFleetClients

/// The pool against a server that writes answers byte for byte: what no HTTP server library
/// would send, cut where it likes.
@Suite("Fleet HTTP client, raw answers")
struct FleetHTTPClientRawTests {
    /// Answers each request by its path with the bytes `answers` holds, in the pieces given
    /// (each written and flushed on its own); counts the connections that carried a request, and
    /// the requests.
    final class Script: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let answers: [String: [String]]
        let seen = Mutex((connections: 0, requests: [String](), carried: Set<Int>()))

        init(answers: [String: [String]]) { self.answers = answers }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let text = String(buffer: unwrapInboundIn(data))
            // One request a read is enough for these tests' small requests.
            guard let line = text.split(separator: "\r\n").first else { return }
            let path = String(line.split(separator: " ").dropFirst().first ?? "")
            // By the client's port: a closed channel's object identity may be a new one's; the
            // client's port of a connection it closed is held in TIME_WAIT.
            let channel = context.channel.remoteAddress?.port ?? -1
            seen.withLock { seen in
                seen.requests.append(path)
                // A connection counts once it carries a request: a connect the client gave up on
                // (a starved machine's loop can hold one past its timeout) carried none.
                if seen.carried.insert(channel).inserted { seen.connections += 1 }
            }
            for piece in answers[path] ?? ["HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"] {
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: piece)), promise: nil)
            }
        }
    }

    static func withServer(_ answers: [String: [String]], _ body: (Int, Script) async throws -> Void) async throws {
        let script = Script(answers: answers)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(script) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { channel.close(promise: nil) }
        try await body(channel.localAddress?.port ?? 0, script)
    }

    @Test("answers cut byte by byte, chunked with extensions and trailers, after an interim 100, are read whole on one connection")
    func cutAnswers() async throws {
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n"
        try await Self.withServer([
            "/bytes": chunked.map { String($0) },
            "/interim": ["HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 201 Created\r\nContent-Length: 2\r\nX-Id: ", "42\r\n\r\nok"],
        ]) { port, script in
            let client = FleetHTTPClient(host: "127.0.0.1", port: port, maxConnections: 1, group: MultiThreadedEventLoopGroup.singleton)
            for _ in 0..<3 {
                let bytes = try await client.execute(.GET, "/bytes", timeout: .seconds(60))
                #expect(bytes.status == 200 && String(buffer: bytes.body) == "hello world")
                let interim = try await client.execute(.POST, "/interim", body: ByteBuffer(string: "{}"), timeout: .seconds(60))
                #expect(interim.status == 201 && String(buffer: interim.body) == "ok" && interim.headers["X-Id"] == ["42"])
            }
            await client.shutdown()
            #expect(script.seen.withLock { $0.connections } == 1)
        }
    }

    static func get(_ backend: BackendClient, _ path: String, headers: [(String, String)] = []) async -> Result<HTTPExchange, TransportError> {
        await backend.exchange(.GET, path, headers: headers, body: nil, timeout: .seconds(60))
    }

    @Test("an answer that is not HTTP fails its request as malformed and the next one takes a new connection")
    func malformed() async throws {
        try await Self.withServer([
            "/garbage": ["SSH-2.0-OpenSSH_9.2\r\n\r\n"],
            "/fine": ["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"],
            "/twice": ["HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb"],
        ]) { port, script in
            let backend = BackendClient(baseURL: "http://127.0.0.1:\(port)", connections: 1)
            // A connect that times out on a starved machine is not what is tested: it is tried again.
            var garbage = await Self.get(backend, "/garbage")
            for _ in 0..<3 where garbage.failureLabel == "timeout" { garbage = await Self.get(backend, "/garbage") }
            #expect(garbage.failureLabel == "malformed_answer")
            let fine = try await Self.get(backend, "/fine").get()
            #expect(fine.status == 200 && fine.text == "ok")
            // Two answers to one request: the first is taken and the connection is not reused.
            #expect(try await Self.get(backend, "/twice").get().text == "a")
            #expect(try await Self.get(backend, "/fine").get().text == "ok")
            await backend.shutdown()
            // garbage; fine and twice (one reused connection); fine.
            #expect(script.seen.withLock { $0.connections } == 3)
        }
    }

    @Test("a header value with a line break is refused before anything is sent")
    func injection() async throws {
        try await Self.withServer(["/fine": ["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]]) { port, script in
            let backend = BackendClient(baseURL: "http://127.0.0.1:\(port)", connections: 1)
            #expect(await Self.get(backend, "/fine", headers: [("X-Token", "abc\r\nGET /smuggled HTTP/1.1")]).failureLabel == "invalid_request")
            let after = try await Self.get(backend, "/fine").get()
            #expect(after.text == "ok")
            await backend.shutdown()
            #expect(script.seen.withLock { $0.requests } == ["/fine"])
        }
    }

    // MARK: A backend that never answers

    /// Every request to `/never` is read and left unanswered.
    static let silent: [String: [String]] = ["/never": []]

    @Test(
        "against a backend that never answers, 20 requests through a pool of 2 with a 1 s timeout all end as timeouts",
        .timeLimit(.minutes(1))
    )
    func silentBackend() async throws {
        try await Self.withServer(Self.silent) { port, _ in
            let client = FleetHTTPClient(host: "127.0.0.1", port: port, maxConnections: 2, group: MultiThreadedEventLoopGroup.singleton)
            let errors = await withTaskGroup(of: FleetHTTPError?.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        do {
                            _ = try await client.execute(.GET, "/never", timeout: .seconds(1))
                            return nil
                        } catch {
                            return error as? FleetHTTPError
                        }
                    }
                }
                return await group.reduce(into: [FleetHTTPError?]()) { $0.append($1) }
            }
            await client.shutdown()
            #expect(errors == Array(repeating: .timeout, count: 20))
        }
    }

    /// Two requests that would wait ten minutes hold both connections, and nothing frees one: a
    /// request behind them can end within the time limit only by its own timeout or cancellation,
    /// however slow the machine (no wall-clock assertion).
    @Test(
        "behind connections a silent backend holds, a waiting request ends at its own timeout without being sent, a cancelled one with CancellationError",
        .timeLimit(.minutes(1))
    )
    func waitingRequests() async throws {
        try await Self.withServer(Self.silent) { port, script in
            let client = FleetHTTPClient(host: "127.0.0.1", port: port, maxConnections: 2, group: MultiThreadedEventLoopGroup.singleton)
            let holders = (0..<2).map { _ in Task { try await client.execute(.GET, "/never", timeout: .seconds(600)) } }
            while script.seen.withLock({ $0.requests.count }) < 2 { try await Task.sleep(for: .milliseconds(10)) }

            let timedOut = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        do {
                            _ = try await client.execute(.GET, "/never", timeout: .milliseconds(500))
                            return false
                        } catch {
                            return error as? FleetHTTPError == .timeout
                        }
                    }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(timedOut == 10)

            // Cancelled before it asks for a connection, and while it waits for one.
            for cancelFirst in [true, false] {
                let waiting = Task {
                    if cancelFirst { withUnsafeCurrentTask { $0?.cancel() } }
                    return try await client.execute(.GET, "/never", timeout: .seconds(600))
                }
                if !cancelFirst { try await Task.sleep(for: .milliseconds(100)) }
                waiting.cancel()
                await #expect(throws: CancellationError.self) { try await waiting.value }
            }

            #expect(script.seen.withLock { $0.requests.count } == 2)
            await client.shutdown()
            for holder in holders { _ = await holder.result }
        }
    }
}

extension Result<HTTPExchange, TransportError> {
    fileprivate var failureLabel: String? {
        if case .failure(let error) = self { error.label } else { nil }
    }
}
