import AsyncHTTPClient
package import Foundation
import NIOCore
package import NIOHTTP1

/// How a test request authenticates.
package enum TestAuth {
    case basic(String, String)
    case bearer(String)
    /// The Authorization header verbatim.
    case raw(String)

    package static func user(_ name: String) -> TestAuth { .basic(name, name) }

    package var header: String {
        switch self {
        case .basic(let user, let password): "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        case .bearer(let token): "Bearer \(token)"
        case .raw(let value): value
        }
    }
}

package struct TestResponse {
    package var status: Int
    package var headers: HTTPHeaders
    package var body: Data

    package var text: String { String(decoding: body, as: UTF8.self) }

    package func json<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: body)
    }
}

/// A plain HTTP client for tests, over real loopback sockets.
package enum TestHTTP {
    package static func request(
        _ method: HTTPMethod,
        _ url: String,
        auth: TestAuth? = nil,
        body: Data? = nil,
        headers: [(String, String)] = [],
        timeout: Duration = .seconds(60)
    ) async throws -> TestResponse {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let auth { request.headers.add(name: "Authorization", value: auth.header) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            if !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
                request.headers.add(name: "Content-Type", value: "application/json")
            }
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .nanoseconds(Int64(timeout / .nanoseconds(1))))
        let buffer = try await response.body.collect(upTo: 16 * 1024 * 1024)
        return TestResponse(status: Int(response.status.code), headers: response.headers, body: Data(buffer.readableBytesView))
    }

    package static func request(
        _ method: HTTPMethod,
        _ url: String,
        auth: TestAuth? = nil,
        json: some Encodable,
        headers: [(String, String)] = []
    ) async throws -> TestResponse {
        try await request(method, url, auth: auth, body: try JSONEncoder().encode(json), headers: headers)
    }
}
