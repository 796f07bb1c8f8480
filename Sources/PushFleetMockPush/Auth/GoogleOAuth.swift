import Foundation
import JWTKit

/// Google's OAuth 2.0 token endpoint for service accounts, as pure rules: the JWT-bearer grant
/// (RFC 7523) whose RS256 assertion names the account (`iss`), the token endpoint (`aud`), the
/// scopes and a lifetime of at most an hour. Errors are Google's `{"error","error_description"}`.
enum GoogleOAuth {
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Audiences Google accepts for the assertion (the current endpoint and its older names).
    static let audiences: Set<String> = [
        "https://oauth2.googleapis.com/token", "https://www.googleapis.com/oauth2/v4/token",
        "https://accounts.google.com/o/oauth2/token",
    ]
    /// Scopes that allow sending with FCM HTTP v1.
    static let messagingScopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform",
    ]
    static let maxAssertionLifetime: Int64 = 3600
    static let allowedSkew: Int64 = 300

    /// What an access token grants.
    struct Grant: Equatable, Sendable {
        var account: String
        var scopes: [String]
        /// The account's project: configured, or read from a `…@PROJECT.iam.gserviceaccount.com` address.
        var project: String?

        var maySendMessages: Bool { scopes.contains(where: GoogleOAuth.messagingScopes.contains) }
    }

    struct Failure: Error, Equatable, Encodable {
        var error: String
        var error_description: String

        static func invalidGrant(_ description: String) -> Failure { Failure(error: "invalid_grant", error_description: description) }
        static let timeframe = invalidGrant(
            "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
        )
        static let signature = invalidGrant("Invalid JWT Signature.")
    }

    struct Claims: JWTPayload {
        var iss: String?
        var aud: AudienceClaim?
        var scope: String?
        var iat: EpochSeconds?
        var exp: EpochSeconds?

        // `check` judges the claims with the injected clock; jwt-kit checks only the signature.
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// A well-formed assertion, signature not yet checked.
    struct Assertion: Equatable, Sendable {
        var text: String
        var account: String
        var scopes: [String]
    }

    /// Checks the form of a token request and the assertion's structure and claims.
    static func check(form: [String: String], now: Int64) -> Result<Assertion, Failure> {
        let grant = form["grant_type"] ?? ""
        guard grant == grantType else {
            return .failure(Failure(error: "unsupported_grant_type", error_description: "Invalid grant_type: \(grant.prefix(100))"))
        }
        guard let text = form["assertion"], !text.isEmpty else {
            return .failure(Failure(error: "invalid_request", error_description: "Missing required parameter: assertion"))
        }
        guard text.utf8.count <= 16_384, let parsed = try? DefaultJWTParser().parse(Array(text.utf8), as: Claims.self) else {
            return .failure(.invalidGrant("Invalid JWT: the assertion is not a signed JWT."))
        }
        guard parsed.header.alg == "RS256", !parsed.signature.isEmpty else { return .failure(.signature) }
        let claims = parsed.payload
        guard let account = claims.iss, account.contains("@"), account.utf8.count <= 320 else {
            return .failure(.invalidGrant("Invalid JWT: iss must be the service account's email."))
        }
        guard let audience = claims.aud, audience.value.contains(where: audiences.contains) else {
            return .failure(.invalidGrant("Invalid JWT: Failed audience check. The right audience is https://oauth2.googleapis.com/token"))
        }
        guard let issued = claims.iat?.seconds, let expires = claims.exp?.seconds, expires > issued,
            expires - issued <= maxAssertionLifetime, issued <= now + allowedSkew, expires > now
        else { return .failure(.timeframe) }
        let scopes = (claims.scope ?? "").split(separator: " ").map(String.init)
        guard !scopes.isEmpty else {
            return .failure(Failure(error: "invalid_scope", error_description: "Empty or missing scope not allowed."))
        }
        return .success(Assertion(text: text, account: account, scopes: scopes))
    }

    /// The project a service account's address names, if it has Google's form.
    static func project(ofAccount account: String) -> String? {
        let suffix = ".iam.gserviceaccount.com"
        guard let at = account.lastIndex(of: "@"), account.hasSuffix(suffix) else { return nil }
        let project = account[account.index(after: at)...].dropLast(suffix.count)
        return project.isEmpty ? nil : String(project)
    }
}

/// `application/x-www-form-urlencoded` bodies, as OAuth token requests send them.
enum FormBody {
    /// The fields, or nil when a key repeats or the encoding is broken.
    static func parse(_ text: String) -> [String: String]? {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : ""),
                fields.updateValue(value, forKey: key) == nil
            else { return nil }
        }
        return fields
    }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
