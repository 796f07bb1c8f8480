import Crypto
import Foundation

/// Issues and checks the backend's login tokens: compact JWTs (HS256) carrying the user and an
/// expiry, signed with HMAC-SHA256 from swift-crypto.
struct TokenSigner: Sendable {
    private struct Header: Codable {
        var alg = "HS256"
        var typ = "JWT"
    }

    private struct Claims: Codable {
        var sub: String
        var iat: Int64
        var exp: Int64
    }

    enum VerifyError: Error, Equatable {
        case malformed
        case badSignature
        case expired
    }

    private let key: SymmetricKey
    let lifetime: Duration

    init(secret: Data, lifetime: Duration) {
        self.key = SymmetricKey(data: secret)
        self.lifetime = lifetime
    }

    /// - Parameter now: seconds since the epoch.
    func issue(user: String, now: Int64) -> String {
        let header = Self.encode(Header())
        let claims = Self.encode(Claims(sub: user, iat: now, exp: now + lifetime.components.seconds))
        let signingInput = header + "." + claims
        return signingInput + "." + Self.base64URL(Data(HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: key)))
    }

    /// Returns the user a valid, unexpired token names.
    func verify(_ token: String, now: Int64) throws(VerifyError) -> String {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let signature = Self.data(base64URL: parts[2]),
            let headerData = Self.data(base64URL: parts[0]),
            let header = try? JSONDecoder().decode(Header.self, from: headerData), header.alg == "HS256"
        else { throw .malformed }
        let signingInput = Data("\(parts[0]).\(parts[1])".utf8)
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signingInput, using: key) else {
            throw .badSignature
        }
        guard let claimsData = Self.data(base64URL: parts[1]), let claims = try? JSONDecoder().decode(Claims.self, from: claimsData),
            !claims.sub.isEmpty
        else { throw .malformed }
        guard claims.exp > now else { throw .expired }
        return claims.sub
    }

    private static func encode(_ value: some Encodable) -> String {
        base64URL((try? JSONEncoder().encode(value)) ?? Data())
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func data(base64URL text: some StringProtocol) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.contains("=") else { return nil }
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
