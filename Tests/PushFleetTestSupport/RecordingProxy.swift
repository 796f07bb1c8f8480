import AsyncHTTPClient
import Hummingbird
import HTTPTypes
package import Logging
import NIOCore
import NIOHTTP1
package import PushFleetServerSupport
package import ServiceLifecycle
package import Synchronization

/// An HTTP/1.1 proxy in front of a real server that keeps what each request carried (method,
/// path, headers) and forwards it unchanged, answer included: what a client or a backend put on
/// the wire, read where a server would read it.
package final class RecordingProxy: Sendable {
    package struct Seen: Sendable {
        package var method: String
        package var path: String
        /// Field names lower-cased; a repeated field's values joined with ", ".
        package var headers: [String: String]
    }

    package let upstream: String
    package let seen = Mutex<[Seen]>([])
    package let bound = Readiness<ListenAddress>()

    package init(upstream: String) {
        self.upstream = upstream
    }

    package var requests: [Seen] { seen.withLock { $0 } }

    package func makeService(logger: Logger) -> any Service {
        let router = Router()
        for method in [HTTPRequest.Method.get, .post, .put, .delete] {
            router.on("**", method: method) { request, _ in try await self.forward(request) }
        }
        let bound = self.bound
        return Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { bound.succeed(ListenAddress(host: "127.0.0.1", port: $0.localAddress?.port ?? 0)) }, logger: logger
        )
    }

    private func forward(_ request: Request) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: 8 << 20)
        var headers: [String: String] = [:]
        for field in request.headers {
            let name = field.name.canonicalName
            headers[name] = headers[name].map { $0 + ", " + field.value } ?? field.value
        }
        seen.withLock { $0.append(Seen(method: request.method.rawValue, path: request.uri.description, headers: headers)) }
        var upstreamRequest = HTTPClientRequest(url: upstream + request.uri.description)
        upstreamRequest.method = HTTPMethod(rawValue: request.method.rawValue)
        for field in request.headers where field.name.canonicalName != "host" && field.name != .contentLength && field.name != .connection {
            upstreamRequest.headers.add(name: field.name.rawName, value: field.value)
        }
        if body.readableBytes > 0 || request.method == .post || request.method == .put { upstreamRequest.body = .bytes(body) }
        let answer = try await HTTPClient.shared.execute(upstreamRequest, timeout: .seconds(60))
        var fields = HTTPFields()
        for (name, value) in answer.headers {
            guard let field = HTTPField.Name(name), field != .contentLength, field != .connection, field != .transferEncoding else { continue }
            fields.append(HTTPField(name: field, value: value))
        }
        let data = try await answer.body.collect(upTo: 8 << 20)
        return Response(status: .init(code: Int(answer.status.code)), headers: fields, body: .init(byteBuffer: data))
    }
}
