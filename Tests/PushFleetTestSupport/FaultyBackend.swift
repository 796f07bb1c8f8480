import AsyncHTTPClient
import Foundation
import Hummingbird
import HTTPTypes
package import Logging
import NIOCore
import NIOHTTP1
package import PushFleetServerSupport
package import ServiceLifecycle
package import Synchronization

/// A deliberately broken backend for testing the checker: a proxy in front of the reference
/// backend that, for plain sends, misdelivers the first `misdeliver` (also sends them to
/// another user), drops the next `drop` (answers 200, sends nothing) and duplicates the next
/// `duplicate`; and lets the first leak probe read someone else's secure payload.
package final class FaultyBackend: Sendable {
    package struct Tally: Sendable, Equatable {
        package var misdelivered = 0
        package var dropped = 0
        package var duplicated = 0
        package var leaked = 0

        package init(misdelivered: Int = 0, dropped: Int = 0, duplicated: Int = 0, leaked: Int = 0) {
            self.misdelivered = misdelivered
            self.dropped = dropped
            self.duplicated = duplicated
            self.leaked = leaked
        }
    }

    package let upstream: String
    package let misdeliver: Int
    package let drop: Int
    package let duplicate: Int
    package let tally = Mutex(Tally())
    /// Secure ids and their recipients, learnt from the send answers.
    private let recipients = Mutex<[String: String]>([:])
    package let bound = Readiness<ListenAddress>()

    package init(upstream: String, misdeliver: Int, drop: Int, duplicate: Int) {
        self.upstream = upstream
        self.misdeliver = misdeliver
        self.drop = drop
        self.duplicate = duplicate
    }

    private enum Sabotage { case none, misdeliver, drop, duplicate }

    private func nextPlainSabotage() -> Sabotage {
        tally.withLock { t in
            if t.misdelivered < misdeliver { t.misdelivered += 1; return .misdeliver }
            if t.dropped < drop { t.dropped += 1; return .drop }
            if t.duplicated < duplicate { t.duplicated += 1; return .duplicate }
            return .none
        }
    }

    package func makeService(logger: Logger) -> any Service {
        let router = Router()
        router.on("**", method: .get) { request, _ in try await self.handle(request) }
        router.on("**", method: .post) { request, _ in try await self.handle(request) }
        router.on("**", method: .put) { request, _ in try await self.handle(request) }
        router.on("**", method: .delete) { request, _ in try await self.handle(request) }
        let bound = self.bound
        return Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { bound.succeed(ListenAddress(host: "127.0.0.1", port: $0.localAddress?.port ?? 0)) }, logger: logger
        )
    }

    private func forward(_ method: HTTPMethod, _ target: String, auth: String?, body: ByteBuffer?) async throws -> (Int, ByteBuffer) {
        var request = HTTPClientRequest(url: upstream + target)
        request.method = method
        if let auth { request.headers.add(name: "Authorization", value: auth) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(body)
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        return (Int(response.status.code), try await response.body.collect(upTo: 8 << 20))
    }

    private func handle(_ request: Request) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: 8 << 20)
        let target = request.uri.description
        let auth = request.headers[.authorization]
        let method = HTTPMethod(rawValue: request.method.rawValue)
        var (status, answer) = (200, ByteBuffer())
        if request.method == .post, request.uri.path == "/api/notifications" {
            switch nextPlainSabotage() {
            case .drop:
                answer = ByteBuffer(string: #"{"outcome":"Completed","targets":1,"accepted":1,"failed":0,"removed":0}"#)
            case .misdeliver:
                (status, answer) = try await forward(method, target, auth: auth, body: body)
                let query = request.uri.queryParameters
                let user = Int(query["to_tag"]?.dropFirst(4) ?? "1") ?? 1
                let other = "user\(user % 4 + 1)"
                let pns = query["pns"].map(String.init) ?? "apns"
                _ = try await forward(method, "/api/notifications?pns=\(pns)&to_tag=\(other)", auth: auth, body: body)
            case .duplicate:
                (status, answer) = try await forward(method, target, auth: auth, body: body)
                _ = try await forward(method, target, auth: auth, body: body)
            case .none:
                (status, answer) = try await forward(method, target, auth: auth, body: body)
            }
        } else if request.method == .post, request.uri.path == "/api/notifications/secure" {
            (status, answer) = try await forward(method, target, auth: auth, body: body)
            if let outcome = try? JSONSerialization.jsonObject(with: Data(answer.readableBytesView)) as? [String: Any],
                let id = outcome["id"] as? String, let to = request.uri.queryParameters["to_tag"]
            {
                recipients.withLock { $0[id] = String(to) }
            }
        } else if request.method == .get, request.uri.path.hasPrefix("/api/notifications/") {
            let id = String(request.uri.path.dropFirst("/api/notifications/".count))
            let reader = auth.flatMap { Data(base64Encoded: String($0.dropFirst(6))) }.flatMap { String(data: $0, encoding: .utf8) }?
                .split(separator: ":").first.map(String.init)
            let owner = recipients.withLock { $0[id] }
            let grant = owner != nil && reader != owner && tally.withLock { t in
                guard t.leaked == 0 else { return false }
                t.leaked = 1
                return true
            }
            let credentials = grant ? "Basic " + Data("\(owner!):\(owner!)".utf8).base64EncodedString() : auth
            (status, answer) = try await forward(method, target, auth: credentials, body: nil)
        } else {
            (status, answer) = try await forward(method, target, auth: auth, body: body.readableBytes > 0 ? body : nil)
        }
        return Response(status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: answer))
    }
}
