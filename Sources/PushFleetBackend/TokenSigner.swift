import Crypto
package import Foundation
import JWTKit

/// Issues and checks the backend's login tokens: compact JWTs (HS256) carrying the user and an
/// expiry, by jwt-kit. It replaced a hand-written verifier on swift-crypto's HMAC that checked
/// 2.2 times fewer tokens per CPU-second (`pushfleet bench tokens`, docs/performance.md).
package struct TokenSigner: Sendable {
    struct Claims: JWTPayload {
        var sub: String
        var iat: Int64
        var exp: Int64

        /// Expiry is checked by the caller, against the time it is given.
        func verify(using algorithm: some JWTAlgorithm) async throws {
            guard !sub.isEmpty else { throw JWTError.claimVerificationFailure(failedClaim: nil, reason: "the token names no user") }
        }
    }

    package enum VerifyError: Error, Equatable {
        case malformed
        case badSignature
        case expired
    }

    /// A key collection is an actor, made once; the task is done before the first request.
    private let keys: Task<JWTKeyCollection, Never>
    package let lifetime: Duration

    /// HS256 keys are at least 32 bytes (RFC 7518 §3.2; `serve` refuses shorter secrets). A
    /// shorter one given here is used as its SHA-256, so a key of the size asked for is made
    /// from all of it.
    package init(secret: Data, lifetime: Duration) {
        let key = secret.count >= 32 ? HMACKey(from: secret) : HMACKey(from: Data(SHA256.hash(data: secret)))
        self.keys = Task { await JWTKeyCollection().add(hmac: key, digestAlgorithm: .sha256) }
        self.lifetime = lifetime
    }

    /// - Parameter now: seconds since the epoch.
    package func issue(user: String, now: Int64) async throws -> String {
        try await keys.value.sign(Claims(sub: user, iat: now, exp: expiry(issuedAt: now)))
    }

    /// When a token issued at `now` expires (seconds since the epoch).
    package func expiry(issuedAt now: Int64) -> Int64 {
        now + lifetime.components.seconds
    }

    /// Returns the user a valid, unexpired token names.
    package func verify(_ token: String, now: Int64) async throws(VerifyError) -> String {
        try await verifiedClaims(token, now: now).user
    }

    /// The user a valid, unexpired token names, and when it expires (seconds since the epoch).
    package func verifiedClaims(_ token: String, now: Int64) async throws(VerifyError) -> (user: String, expires: Int64) {
        let claims: Claims
        do {
            claims = try await keys.value.verify(token, as: Claims.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw .badSignature
        } catch {
            throw .malformed
        }
        guard claims.exp > now else { throw .expired }
        return (claims.sub, claims.exp)
    }
}
