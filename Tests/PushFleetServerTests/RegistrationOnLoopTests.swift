import Foundation
import HTTPTypes
import HummingbirdCore
import NIOCore
import NIOHTTP1
import PushFleetEmbedded
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Testing

@testable import PushFleetBackend

/// A device's registration answered on the event loop (``BackendRoutes``): the router's answer,
/// given only when nothing needs waiting, and everything else left to the router.
@Suite("Backend registration on the event loop")
struct RegistrationOnLoopTests {
    static func body(_ platform: String, _ handle: String, _ tags: [String]? = nil) -> ByteBuffer {
        ByteBuffer(bytes: Array(try! JSONEncoder().encode(DeviceRegistration(platform: platform, handle: handle, tags: tags))))
    }

    @Test("only POST /api/register (any query) and a PUT of one plain id are taken at the loop")
    func routeParsing() async throws {
        try await BackendRoutesTests.withBackend { backend, _ in
            let routes = BackendRoutes(backend: backend)
            let head = BackendRoutesTests.head
            #expect(routes.route(for: head(.post, "/api/register"))?.kind == 2)
            #expect(routes.route(for: head(.post, "/api/register?handle=a%20b"))?.kind == 2)
            #expect(routes.route(for: head(.put, "/api/register/r-1"))?.kind == 3)
            #expect(routes.route(for: head(.put, "/api/register/r-1"))?.parameter == "r-1")
            for (method, path) in [
                (HTTPRequest.Method.post, "/api/registerx"), (.post, "/api/register/x"), (.get, "/api/register"), (.put, "/api/register"),
                (.put, "/api/register/"), (.put, "/api/register/a/b"), (.put, "/api/register/%41"), (.put, "/api/register/a?x=1"),
                (.put, "/api/register/a#b"), (.put, "/api/register/é"), (.delete, "/api/register/a"), (.put, "/API/register/a"),
            ] {
                #expect(routes.route(for: head(method, path)) == nil, "\(method) \(path)")
            }
        }
    }

    @Test("the handle query is read from the target's bytes as the router's URI reads it, for any query")
    func handleAsURIReadsIt() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["handle", "handl", "=", "&", "tok", "%41", "%", "#", "+", "?", "é", "x=y", ""]
        for _ in 0..<3_000 {
            let count = Int.random(in: 0...7, using: &generator)
            let target = "/api/register?" + (0..<count).map { _ in pieces.randomElement(using: &generator)! }.joined()
            #expect(ReferenceBackend.queryValue("handle", inTarget: target) == URI(target).queryParameters["handle"], "\(target)")
        }
        #expect(ReferenceBackend.queryValue("handle", inTarget: "/api/register") == nil)
    }

    @Test("a registration made and updated at the loop is the store's, as the router makes it")
    func answersWhatTheRouterAnswers() async throws {
        try await BackendRoutesTests.withBackend { backend, store in
            let bob = BackendRoutesTests.basic("bob")
            let created = try #require(backend.createRegistrationAtOnce(target: "/api/register?handle=tok-1", authorization: bob))
            #expect(created.status == .ok && created.headers[.contentType] == "application/json")
            let id = try JSONDecoder().decode(String.self, from: Data(created.body.readableBytesView))
            let bare = try #require(backend.createRegistrationAtOnce(target: "/api/register", authorization: bob))
            #expect(try JSONDecoder().decode(String.self, from: Data(bare.body.readableBytesView)) != id)

            let updated = try #require(backend.updateRegistrationAtOnce(id: id, body: Self.body("fcm", "tok-1", ["news"]), authorization: bob))
            #expect(updated.status == .ok && updated.body.readableBytes == 0)
            let now = backend.configuration.clock()
            let found = store.targets(tag: ReferenceBackend.userTag("bob"), now: now)
            #expect(found.map(\.id) == [id] && found.first?.platform == .fcm && found.first?.handle == "tok-1")
            #expect(store.targets(tag: "news", now: now).map(\.id) == [id])
        }
    }

    @Test("what the router refuses or must wait for goes to it, and changes nothing")
    func leavesTheRestToTheRouter() async throws {
        try await BackendRoutesTests.withBackend { backend, store in
            let bob = BackendRoutesTests.basic("bob")
            let alice = BackendRoutesTests.basic("alice")
            #expect(backend.createRegistrationAtOnce(target: "/api/register", authorization: nil) == nil)
            #expect(backend.createRegistrationAtOnce(target: "/api/register", authorization: "Basic !!!") == nil)
            #expect(backend.createRegistrationAtOnce(target: "/api/register?handle=a%20b", authorization: bob) == nil, "a space after decoding")
            #expect(backend.createRegistrationAtOnce(target: "/api/register?handle=", authorization: bob) == nil)
            #expect(store.counts().registrations == 0)

            let id = try store.createRegistration(owner: "bob", handle: nil, now: backend.configuration.clock())
            func update(_ body: ByteBuffer, as caller: String? = BackendRoutesTests.basic("bob"), id: String = id) -> CompleteResponse? {
                backend.updateRegistrationAtOnce(id: id, body: body, authorization: caller)
            }
            #expect(update(Self.body("apns", "t"), as: alice) == nil, "another user's")
            #expect(update(Self.body("apns", "t"), id: "no-such-id") == nil)
            #expect(update(Self.body("carrier-pigeon", "t")) == nil)
            #expect(update(Self.body("webpush", "{}")) == nil, "a subscription is parsed on the router")
            #expect(update(Self.body("apns", "a b")) == nil)
            #expect(update(Self.body("apns", "t", ["username:alice"])) == nil)
            #expect(update(Self.body("apns", "t", ["bad tag"])) == nil)
            #expect(update(ByteBuffer(string: "{\"Platform\":")) == nil)
            #expect(update(ByteBuffer(string: "[]")) == nil)
            #expect(store.targets(tag: ReferenceBackend.userTag("bob"), now: backend.configuration.clock()).isEmpty, "nothing registered")

            backend.configuration.faults.replace(with: BackendLatency(fetch: .fixed(ms: 5)))
            #expect(backend.createRegistrationAtOnce(target: "/api/register", authorization: bob) == nil)
            #expect(update(Self.body("apns", "t")) == nil)
            backend.configuration.faults.replace(with: BackendLatency())
            #expect(update(Self.body("apns", "t")) != nil)
        }
    }

    @Test("over a socket, hostile registrations get the router's answers; a login's token is known at once after it")
    func overSocket() async throws {
        try await TestSystem.runEmbedded { (embedded: EmbeddedSystem, system: TestSystem) async throws in
            let id = try await system.createRegistrationID("bob", handle: "tok-9")
            func put(_ path: String, _ body: String, auth: TestAuth = .user("bob")) async throws -> Int {
                try await TestHTTP.request(.PUT, "\(system.backend)\(path)", auth: auth, body: Data(body.utf8)).status
            }
            #expect(try await put("/api/register/\(id)", "{\"Platform\":") == 400)
            #expect(try await put("/api/register/\(id)", "{\"Platform\":\"apns\",\"Handle\":\"t\"}", auth: .user("alice")) == 403)
            #expect(try await put("/api/register/no-such-id", "{\"Platform\":\"apns\",\"Handle\":\"t\"}") == 410)
            #expect(try await put("/api/register/\(id)", "{\"Platform\":\"apns\",\"Handle\":\"t\",\"Tags\":[\"username:alice\"]}") == 403)
            #expect(try await TestHTTP.request(.POST, "\(system.backend)/api/register?handle=a%20b", auth: .user("bob")).status == 400)
            #expect(try await TestHTTP.request(.POST, "\(system.backend)/api/register").status == 401)
            #expect(try await put("/api/register/\(id)", "{\"Platform\":\"apns\",\"Handle\":\"tok-9\"}") == 200)

            let login = try await TestHTTP.request(.POST, "\(system.backend)/api/login", auth: .user("carol"))
            #expect(login.status == 200)
            let token = try login.json(LoginResponse.self).token
            let backend = try #require(embedded.backend.current)
            #expect(backend.knownCaller("Bearer \(token)") == "carol")
        }
    }
}
