import Foundation
import JWTKit

/// A provider authentication token as APNs reads it: an ES256 JWT whose header names the
/// signing key (`kid`) and whose claims name the team (`iss`) and the issue time (`iat`).
///
/// Apple's rules, checked here without a clock of its own (`now` is given):
/// - a token whose `iat` is more than an hour old is `ExpiredProviderToken`;
/// - anything malformed, another algorithm, a missing `kid`/`iss`/`iat`, or an `iat` in the
///   future beyond the allowed skew is `InvalidProviderToken`.
struct APNsProviderToken: Equatable, Sendable {
    static let lifetime: Int64 = 3600
    /// How far ahead of our clock an `iat` may be (the provider's clock may run ahead).
    static let allowedSkew: Int64 = 300

    struct Identity: Equatable, Sendable {
        var keyID: String
        var teamID: String
        var issuedAt: Int64
    }

    struct Claims: JWTPayload {
        var iss: String?
        var iat: EpochSeconds?

        // Claims are checked by `inspect`, with the injected clock; jwt-kit checks the signature.
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    enum Failure: String, Error, Equatable, Sendable {
        case invalid = "InvalidProviderToken"
        case expired = "ExpiredProviderToken"
    }

    /// The token's text, as it came after `bearer `.
    let text: String
    let identity: Identity

    /// Parses and checks structure and claims; the signature is checked apart (it needs keys).
    static func inspect(_ text: String, now: Int64) -> Result<APNsProviderToken, Failure> {
        guard text.utf8.count <= 4096, let parsed = try? DefaultJWTParser().parse(Array(text.utf8), as: Claims.self) else {
            return .failure(.invalid)
        }
        let header = parsed.header
        // ES256 signatures are r‖s, 32 bytes each.
        guard header.alg == "ES256", parsed.signature.count == 64,
            let keyID = header.kid, isPrintableID(keyID),
            let team = parsed.payload.iss, isPrintableID(team),
            let issuedAt = parsed.payload.iat?.seconds
        else { return .failure(.invalid) }
        if issuedAt > now + allowedSkew { return .failure(.invalid) }
        if now - issuedAt > lifetime { return .failure(.expired) }
        return .success(APNsProviderToken(text: text, identity: Identity(keyID: keyID, teamID: team, issuedAt: issuedAt)))
    }

    /// Whether a token accepted earlier has outlived its hour by `now`.
    static func isExpired(_ identity: Identity, now: Int64) -> Bool {
        now - identity.issuedAt > lifetime
    }

    /// Key and team ids are short printable ASCII (Apple's are 10 characters).
    static func isPrintableID(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count) && text.utf8.allSatisfy { (33...126).contains($0) }
    }
}

/// A NumericDate claim: whole seconds since the epoch, written as an integer or a number.
/// Checked where it enters: within ±10¹² s (tens of millennia), so differences of two never
/// overflow.
struct EpochSeconds: Codable, Equatable, Sendable {
    static let limit: Int64 = 1_000_000_000_000
    var seconds: Int64

    init(_ seconds: Int64) {
        self.seconds = seconds
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let value: Double
        if let whole = try? container.decode(Int64.self) {
            value = Double(whole)
        } else {
            value = try container.decode(Double.self)
        }
        guard value.isFinite, abs(value) <= Double(Self.limit) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a usable time")
        }
        seconds = Int64(value.rounded(.down))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(seconds)
    }
}
