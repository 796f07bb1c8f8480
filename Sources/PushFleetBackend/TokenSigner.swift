import Crypto
package import Foundation
import PushFleetCore

/// Issues and checks the backend's login tokens: compact JWTs (HS256) carrying the user and an
/// expiry, signed with HMAC-SHA256 from swift-crypto.
package struct TokenSigner: Sendable {
    private struct Header: Codable {
        var alg = "HS256"
        var typ = "JWT"
    }

    private struct Claims: Codable {
        var sub: String
        var iat: Int64
        var exp: Int64
    }

    package enum VerifyError: Error, Equatable {
        case malformed
        case badSignature
        case expired
    }

    private let key: SymmetricKey
    let lifetime: Duration

    package init(secret: Data, lifetime: Duration) {
        self.key = SymmetricKey(data: secret)
        self.lifetime = lifetime
    }

    /// The header every token carries, encoded once.
    private static let headerSegment = encode(Header())

    /// - Parameter now: seconds since the epoch.
    package func issue(user: String, now: Int64) -> String {
        let header = Self.headerSegment
        let claims = Self.encode(Claims(sub: user, iat: now, exp: now + lifetime.components.seconds))
        let signingInput = header + "." + claims
        return signingInput + "." + Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: key)))
    }

    /// Returns the user a valid, unexpired token names.
    package func verify(_ token: String, now: Int64) throws(VerifyError) -> String {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let signature = Base64URL.decode(parts[2]) else { throw .malformed }
        // The header this signer writes is known; another is read to see whether it says HS256.
        if parts[0] != Self.headerSegment {
            guard let headerData = Base64URL.decode(parts[0]),
                let header = try? JSONDecoder().decode(Header.self, from: headerData), header.alg == "HS256"
            else { throw .malformed }
        }
        let signingInput = Data(token.utf8[token.utf8.startIndex..<parts[1].utf8.endIndex])
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signingInput, using: key) else {
            throw .badSignature
        }
        guard let claimsData = Base64URL.decode(parts[1]), let claims = try? JSONDecoder().decode(Claims.self, from: claimsData),
            !claims.sub.isEmpty
        else { throw .malformed }
        guard claims.exp > now else { throw .expired }
        return claims.sub
    }

    private static func encode(_ value: some Encodable) -> String {
        Base64URL.encode((try? JSONEncoder().encode(value)) ?? Data())
    }
}
