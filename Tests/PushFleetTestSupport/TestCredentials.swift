package import Crypto
package import CryptoExtras
package import Foundation
import NIOHTTP1
package import PushFleetWire
import Synchronization

/// Provider credentials as a sender makes them, written apart from the mock's and the backend's
/// code (plain swift-crypto, no JWT library): an ES256 APNs provider token, and the RS256
/// service-account assertion and WNS client credentials exchanged for access tokens.
package enum TestCredentials {
    package static let apnsKey = P256.Signing.PrivateKey()
    package static let apnsKeyID = "TESTKEY001"
    package static let apnsTeamID = "TESTTEAM01"
    /// One token for the whole test process: a provider reuses its token for up to an hour.
    package static let apnsToken = apnsToken(issuedAt: Int64(Date().timeIntervalSince1970))
    package static let apnsAuthorization = "bearer \(apnsToken)"

    /// An RSA key made once, off Swift's pool (seconds in a debug build would stall the pool).
    private static let googleKeyTask = Task { try await offPool { try _RSA.Signing.PrivateKey(keySize: .bits2048) } }
    package static func googleKey() async throws -> _RSA.Signing.PrivateKey { try await googleKeyTask.value }

    package static func base64URL(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    package static func jwt(header: [String: Any], claims: [String: Any], sign: (Data) throws -> Data) rethrows -> String {
        let head = base64URL(try! JSONSerialization.data(withJSONObject: header, options: .sortedKeys))
        let body = base64URL(try! JSONSerialization.data(withJSONObject: claims, options: .sortedKeys))
        let signature = try sign(Data("\(head).\(body)".utf8))
        return "\(head).\(body).\(base64URL(signature))"
    }

    /// An APNs provider token (`alg` ES256, `kid`, `iss`, `iat`).
    package static func apnsToken(
        issuedAt: Int64,
        keyID: String = apnsKeyID,
        teamID: String = apnsTeamID,
        key: P256.Signing.PrivateKey = apnsKey,
        algorithm: String = "ES256"
    ) -> String {
        jwt(header: ["alg": algorithm, "kid": keyID], claims: ["iss": teamID, "iat": issuedAt]) { data in
            try! key.signature(for: data).rawRepresentation
        }
    }

    /// A service-account assertion for Google's token endpoint.
    package static func googleAssertion(
        account: String = "sender@demo.iam.gserviceaccount.com",
        scope: String = "https://www.googleapis.com/auth/firebase.messaging",
        audience: String = "https://oauth2.googleapis.com/token",
        issuedAt: Int64 = Int64(Date().timeIntervalSince1970),
        lifetime: Int64 = 3600
    ) async throws -> String {
        let key = try await googleKey()
        return jwt(
            header: ["alg": "RS256", "typ": "JWT"],
            claims: ["iss": account, "scope": scope, "aud": audience, "iat": issuedAt, "exp": issuedAt + lifetime]
        ) { data in
            try! key.signature(for: data, padding: .insecurePKCS1v1_5).rawRepresentation
        }
    }

    /// Exchanges an assertion at the push service's token endpoint; the whole answer.
    package static func googleTokenResponse(pushService: String, assertion: String) async throws -> TestResponse {
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        return try await TestHTTP.request(
            .POST, "\(pushService)/token", body: Data(form.utf8), headers: [("content-type", "application/x-www-form-urlencoded")]
        )
    }

    /// `Bearer <access token>` for FCM sends to project `demo`.
    package static func fcmAuthorization(pushService: String, account: String = "sender@demo.iam.gserviceaccount.com") async throws -> String {
        let response = try await googleTokenResponse(pushService: pushService, assertion: try await googleAssertion(account: account))
        guard response.status == 200, let token = try response.json([String: TokenValue].self)["access_token"]?.text else {
            throw UnexpectedStatus(call: "POST /token", response: response)
        }
        return "Bearer \(token)"
    }

    /// `Bearer <access token>` for WNS sends.
    package static func wnsAuthorization(pushService: String, id: String = "ms-app://s-1-15-2-test", secret: String = "secret") async throws -> String {
        let form = "grant_type=client_credentials&client_id=\(id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id)&client_secret=\(secret)&scope=notify.windows.com"
        let response = try await TestHTTP.request(
            .POST, "\(pushService)/accesstoken.srf", body: Data(form.utf8), headers: [("content-type", "application/x-www-form-urlencoded")]
        )
        guard response.status == 200, let token = try response.json([String: TokenValue].self)["access_token"]?.text else {
            throw UnexpectedStatus(call: "POST /accesstoken.srf", response: response)
        }
        return "Bearer \(token)"
    }

    /// The `authorization` a provider request to `platform` needs.
    package static func authorization(for platform: Platform, pushService: String) async throws -> String {
        switch platform {
        case .apns: apnsAuthorization
        case .fcm: try await fcmAuthorization(pushService: pushService)
        default: try await wnsAuthorization(pushService: pushService)
        }
    }

    /// Access tokens fetched once per platform, reused as a sender reuses them.
    package final class Cache: Sendable {
        private let tokens = Mutex<[Platform: String]>([:])

        package func authorization(for platform: Platform, pushService: String) async throws -> String {
            if let cached = tokens.withLock({ $0[platform] }) { return cached }
            let fetched = try await TestCredentials.authorization(for: platform, pushService: pushService)
            tokens.withLock { $0[platform] = fetched }
            return fetched
        }
    }

    /// A token answer's values are strings or numbers.
    package enum TokenValue: Decodable {
        case text(String)
        case number(Double)

        package init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) { self = .text(text) } else { self = .number(try container.decode(Double.self)) }
        }

        package var text: String? { if case .text(let text) = self { text } else { nil } }
        package var number: Double? { if case .number(let number) = self { number } else { nil } }
    }
}
