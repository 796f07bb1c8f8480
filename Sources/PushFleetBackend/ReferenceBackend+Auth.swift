import Foundation
import HTTPTypes
import Hummingbird
import PushFleetServerSupport
import PushFleetWire

extension ReferenceBackend {
    static let challenge: HTTPFields = [.wwwAuthenticate: "Basic realm=\"pushfleet\", Bearer realm=\"pushfleet\""]

    static func unauthorized(_ message: String) -> HTTPError {
        HTTPError(.unauthorized, headers: challenge, message: message)
    }

    /// The caller's user name, from Basic credentials or a login token; 401 otherwise.
    func authenticate(_ request: Request) async throws -> String {
        let header = request.headers[.authorization]
        if let header, let user = verifiedBasic.user(of: header, now: 0) { return user }
        let credentials: Credentials
        do {
            credentials = try Credentials(header: header)
        } catch {
            throw Self.unauthorized(error.description)
        }
        if let header, let user = knownCaller(credentials, header: header) { return user }
        guard case .bearer(let token) = credentials else { throw Self.unauthorized("unknown user or wrong password") }
        let now = Int64(Date().timeIntervalSince1970)
        do {
            let claims = try await signer.verifiedClaims(token, now: now)
            verifiedTokens.insert(token, user: claims.user, expires: claims.expires)
            return claims.user
        } catch .expired {
            throw Self.unauthorized("token expired; log in again")
        } catch {
            throw Self.unauthorized("invalid token")
        }
    }

    /// The caller, when it can be told without waiting: Basic credentials, or a login token
    /// verified before. Nil leaves the request to ``authenticate(_:)``.
    ///
    /// A device sends the same value on every call: a Basic one accepted before is found by the
    /// value alone, without its base64, its parse and the directory's check (~3% of `serve`'s CPU
    /// per secure push, docs/performance-delivery.md).
    func knownCaller(_ authorization: String?) -> String? {
        guard let authorization else { return nil }
        if let user = verifiedBasic.user(of: authorization, now: 0) { return user }
        return (try? Credentials(header: authorization)).flatMap { knownCaller($0, header: authorization) }
    }

    /// The caller of credentials already parsed from `header`, when known without waiting; a Basic
    /// value the directory accepts is kept whole.
    private func knownCaller(_ credentials: Credentials, header: String) -> String? {
        switch credentials {
        case .basic(let user, let password):
            guard configuration.users.verify(user: user, password: password) else { return nil }
            verifiedBasic.insert(header, user: user, expires: .max)
            return user
        case .bearer(let token):
            return verifiedTokens.user(of: token, now: Int64(Date().timeIntervalSince1970))
        }
    }

    func addLoginRoute(to api: RouterGroup<BasicRequestContext>) {
        // Basic credentials in, a signed expiring token out: the scheme the seeds recommend in
        // place of sending the password on every call.
        api.post("login") { request, _ -> Response in
            let user = try await self.authenticate(request)
            let now = Int64(Date().timeIntervalSince1970)
            let token = try await self.signer.issue(user: user, now: now)
            // Signed here, so verified: the device's next call can be answered on the loop.
            self.verifiedTokens.insert(token, user: user, expires: self.signer.expiry(issuedAt: now))
            return .json(LoginResponse(token: token, expiresIn: Int(self.signer.lifetime.components.seconds)))
        }
    }

    /// Reads the body up to `limit` bytes (413 beyond) and decodes it as JSON (400 on failure).
    func decodeBody<T: Decodable>(_ type: T.Type, from request: Request, limit: Int, what: String) async throws -> T {
        let data = try await body(of: request, limit: limit)
        do {
            return try ServerJSON.decoder.decode(T.self, from: data)
        } catch {
            throw HTTPError(.badRequest, message: "body must be \(what)")
        }
    }

    func body(of request: Request, limit: Int) async throws -> Data {
        var request = request
        guard let buffer = try await request.collectBody(limit: limit) else {
            throw HTTPError(.contentTooLarge, message: "body over \(limit) bytes")
        }
        return buffer.data
    }
}
