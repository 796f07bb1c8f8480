import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

@testable import PushFleetBackend

/// The fetch answered on the event loop: the router's answer, given only when nothing needs
/// waiting. (The seed flow fetches over real sockets through it.)
@Suite("Backend fetch on the event loop")
struct BackendRoutesTests {
    /// A backend with its in-memory store open, and nothing listening; its client is shut down after.
    static func withBackend(_ body: (ReferenceBackend, MemoryStore) async throws -> Void) async throws {
        let backend = ReferenceBackend(configuration: BackendConfiguration(), pushServiceURL: { "http://127.0.0.1:9" })
        do {
            let store = try #require(try await backend.store() as? MemoryStore)
            #expect(backend.storeHandle.memory === store)
            try await body(backend, store)
        } catch {
            try await backend.client.shutdown()
            throw error
        }
        try await backend.client.shutdown()
    }

    /// A request's head as the fast path hands it to the routes.
    static func head(_ method: HTTPRequest.Method, _ path: String) -> HTTPRequest {
        HTTPRequest(method: method, scheme: "http", authority: "127.0.0.1", path: path)
    }

    static func basic(_ user: String) -> String {
        "Basic " + Data("\(user):\(user)".utf8).base64EncodedString()
    }

    @Test("a stored notification is answered as the router answers it, read flag and content type included")
    func answersWhatTheRouterAnswers() async throws {
        try await Self.withBackend { backend, store in
            let now = backend.configuration.clock()
            let secure = try store.createNotification(sender: "alice", recipient: "bob", content: .secure(payload: "code \"1\" / é"), now: now)
            let first = try #require(backend.fetchAtOnce(id: secure.id, authorization: Self.basic("bob")))
            #expect(first.status == .ok && first.headers[.contentType] == "application/json")
            let decoded = try JSONDecoder().decode(SecureNotification.self, from: Data(first.body.readableBytesView))
            #expect(decoded == SecureNotification(id: secure.id, payload: "code \"1\" / é", read: false))
            let second = try #require(backend.fetchAtOnce(id: secure.id, authorization: Self.basic("bob")))
            #expect(try JSONDecoder().decode(SecureNotification.self, from: Data(second.body.readableBytesView)).read)

            let image = Data([0x89, 0x50, 0x4E, 0x47])
            let rich = try store.createNotification(
                sender: "alice", recipient: "bob", content: .rich(message: "m", type: "img", contentType: "image/png", data: image), now: now
            )
            let richAnswer = try #require(backend.fetchAtOnce(id: rich.id, authorization: Self.basic("bob")))
            #expect(richAnswer.headers[.contentType] == "image/png" && Data(richAnswer.body.readableBytesView) == image)
        }
    }

    @Test("what needs the router goes to it: an unknown id or reader, a caller not known at once, injected latency")
    func leavesTheRestToTheRouter() async throws {
        try await Self.withBackend { backend, store in
            let stored = try store.createNotification(sender: "alice", recipient: "bob", content: .secure(payload: "p"), now: backend.configuration.clock())
            #expect(backend.fetchAtOnce(id: "no-such-id", authorization: Self.basic("bob")) == nil)
            // Someone else's: nil, and the notification is still unread for its recipient.
            #expect(backend.fetchAtOnce(id: stored.id, authorization: Self.basic("alice")) == nil)
            #expect(backend.fetchAtOnce(id: stored.id, authorization: "Basic " + Data("bob:wrong".utf8).base64EncodedString()) == nil)
            #expect(backend.fetchAtOnce(id: stored.id, authorization: nil) == nil)
            // A token never verified here: the router verifies it (and remembers it).
            let token = try await backend.signer.issue(user: "bob", now: Int64(Date().timeIntervalSince1970))
            #expect(backend.fetchAtOnce(id: stored.id, authorization: "Bearer \(token)") == nil)
            backend.configuration.faults.replace(with: BackendLatency(fetch: .fixed(ms: 5)))
            #expect(backend.fetchAtOnce(id: stored.id, authorization: Self.basic("bob")) == nil)
            backend.configuration.faults.replace(with: BackendLatency())
            let answer = try #require(backend.fetchAtOnce(id: stored.id, authorization: Self.basic("bob")))
            #expect(try JSONDecoder().decode(SecureNotification.self, from: Data(answer.body.readableBytesView)).read == false)
        }
    }

    @Test("a token verified once is known at once until it expires; a forged one never is")
    func verifiedTokens() async throws {
        try await Self.withBackend { backend, _ in
            let now = Int64(Date().timeIntervalSince1970)
            let token = try await backend.signer.issue(user: "bob", now: now)
            #expect(backend.knownCaller("Bearer \(token)") == nil)
            let claims = try await backend.signer.verifiedClaims(token, now: now)
            #expect(claims.user == "bob" && claims.expires > now)
            backend.verifiedTokens.insert(token, user: claims.user, expires: claims.expires)
            #expect(backend.knownCaller("Bearer \(token)") == "bob")
            #expect(backend.knownCaller("Bearer \(token)x") == nil)
            #expect(backend.verifiedTokens.user(of: token, now: claims.expires) == nil)

            let tokens = VerifiedTokens(capacity: 2)
            tokens.insert("a", user: "ua", expires: 10)
            tokens.insert("b", user: "ub", expires: 10)
            tokens.insert("a", user: "ua", expires: 10)
            #expect(tokens.count == 2)
            tokens.insert("c", user: "uc", expires: 10)
            #expect(tokens.count == 1 && tokens.user(of: "c", now: 9) == "uc" && tokens.user(of: "a", now: 9) == nil)
        }
    }

    @Test("Basic credentials the directory accepted are known again by their value; refused ones are never kept")
    func verifiedBasic() async throws {
        let configuration = BackendConfiguration(users: UserDirectory(passwords: [("bob", "right")]))
        let backend = ReferenceBackend(configuration: configuration, pushServiceURL: { "http://127.0.0.1:9" })
        let header = { (credentials: String) in "Basic " + Data(credentials.utf8).base64EncodedString() }
        #expect(backend.knownCaller(header("bob:wrong")) == nil)
        #expect(backend.knownCaller(header("bob:")) == nil)
        #expect(backend.verifiedBasic.count == 0)
        #expect(backend.knownCaller(header("bob:right")) == "bob")
        #expect(backend.verifiedBasic.count == 1)
        #expect(backend.knownCaller(header("bob:right")) == "bob")
        #expect(backend.knownCaller(header("bob:wrong")) == nil, "a wrong password after a right one")
        #expect(backend.knownCaller(header("eve:right")) == nil)
        #expect(backend.knownCaller(" " + header("bob:right") + "\t") == "bob", "another spelling is judged anew")
        #expect(backend.verifiedBasic.count == 2)
        #expect(backend.knownCaller(header("bob:right") + "x") == nil)
        try await backend.client.shutdown()
    }

    @Test("only a plain GET of one plain id is taken at the loop: escapes, queries, slashes, other methods and odd paths are the router's")
    func routeParsing() async throws {
        try await Self.withBackend { backend, _ in
            let routes = BackendRoutes(backend: backend)
            let head = Self.head
            #expect(routes.route(for: head(.get, "/api/notifications/0a1b-2c"))?.parameter == "0a1b-2c")
            for path in [
                "/api/notifications/", "/api/notifications", "/api/notifications/a/b", "/api/notifications/a?b=1", "/api/notifications/%2e%2e",
                "/api/notifications/a#b", "/api/notifications/a b", "/api/notifications/\u{7F}", "/api/notifications/é", "/API/notifications/a",
                "/api/notifications/" + String(repeating: "\u{1}", count: 3),
            ] {
                #expect(routes.route(for: head(.get, path)) == nil, "\(path)")
            }
            #expect(routes.route(for: head(.post, "/api/notifications/a")) == nil)
            #expect(routes.route(for: head(.delete, "/api/notifications/a")) == nil)
        }
    }

    @Test("over a socket, hostile fetches are answered as the router answers them; a good one after them still works")
    func hostileFetches() async throws {
        try await TestSystem.run { (system: TestSystem) async throws in
            _ = try await system.device("bob", .apns)
            let sent = try await system.sendSecure(from: "alice", to: "bob", payload: "p")
            let id = try #require(try sent.json(SendOutcome.self).id)
            let url = "\(system.backend)/api/notifications/\(id)"
            #expect(try await TestHTTP.request(.GET, url, auth: .raw("Bearer " + String(repeating: "x", count: 6_000))).status == 401)
            #expect(try await TestHTTP.request(.GET, url, auth: .raw("Basic !!!")).status == 401)
            #expect(try await TestHTTP.request(.GET, url).status == 401)
            #expect(try await TestHTTP.request(.GET, url, auth: .user("bob"), body: Data(repeating: 0x41, count: 4_096)).status == 200)
            #expect(try await TestHTTP.request(.GET, url + "%00", auth: .user("bob")).status == 404)
            #expect(try await TestHTTP.request(.GET, url + "?x=1", auth: .user("bob")).status == 200)
            #expect(try await system.fetch(id, as: "alice").status == 404)
            let fetched = try await system.fetch(id, as: "bob")
            #expect(fetched.status == 200)
            #expect(try fetched.json(SecureNotification.self) == SecureNotification(id: id, payload: "p", read: true))
        }
    }
}
