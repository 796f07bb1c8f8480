import AsyncHTTPClient
import CryptoExtras
import Foundation
import JWTKit
import NIOCore
import NIOHTTP1
import PushFleetHub
import PushFleetWire
import Synchronization

/// The credentials the backend presents to the push services, as a real backend's push
/// libraries obtain them: an ES256 provider token for APNs (renewed every 50 minutes, inside
/// Apple's 20–60), and OAuth access tokens for FCM (a service-account JWT exchanged at the
/// token endpoint) and WNS (client credentials), each fetched once and reused until near expiry.
final class ProviderCredentials: Sendable {
    struct Settings: Sendable {
        var apnsKeyID: String
        var apnsTeamID: String
        /// The APNs signing key (a `.p8` file's PEM); nil: a key made at start.
        var apnsKeyPEM: String?
        /// The FCM project the service account belongs to.
        var fcmProject: String
        var wnsClientID: String
        var wnsClientSecret: String
    }

    /// APNs tokens are renewed this long after issue.
    static let apnsTokenAge: Int64 = 50 * 60
    /// OAuth tokens are renewed this long before they expire.
    static let refreshMargin: Int64 = 60

    private struct Cached: Sendable {
        var header: String
        /// Seconds since the epoch after which a new one is fetched.
        var renewAt: Int64
    }

    private let settings: Settings
    private let client: HTTPClient
    private let baseURL: @Sendable () async throws -> String
    private let cache = Mutex<[Platform: Task<Cached, any Error>]>([:])
    /// The tokens fetched, beside their tasks: read without waiting (``authorizationNow(for:)``).
    private let ready = Mutex<[Platform: Cached]>([:])
    private let apnsKeys: Task<JWTKeyCollection, any Error>
    /// The service account's key, one per process: an RSA key costs tens of milliseconds to make
    /// (seconds in a debug build), and every backend instance (a restart makes one) would pay it.
    /// Made on a thread of its own: seconds of blocking would stall Swift's small pool.
    private static let googleKeys = Task<JWTKeyCollection, any Error> {
        let backing = try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try _RSA.Signing.PrivateKey(keySize: .bits2048) }) }
        }
        return await JWTKeyCollection().add(rsa: try Insecure.RSA.PrivateKey(backing: backing), digestAlgorithm: .sha256)
    }

    init(settings: Settings, client: HTTPClient, baseURL: @escaping @Sendable () async throws -> String) {
        self.settings = settings
        self.client = client
        self.baseURL = baseURL
        let apnsPEM = settings.apnsKeyPEM
        self.apnsKeys = Task {
            let key = try apnsPEM.map { try ES256PrivateKey(pem: $0) } ?? ES256PrivateKey()
            return await JWTKeyCollection().add(ecdsa: key)
        }
        // Started now, so that it is ready by the first FCM send.
        _ = Self.googleKeys
    }

    /// The `authorization` header value for a push to `platform`.
    func authorization(for platform: Platform) async throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        let task = cache.withLock { cache -> Task<Cached, any Error> in
            if let existing = cache[platform] { return existing }
            let task = Task { try await self.fetch(platform) }
            cache[platform] = task
            return task
        }
        do {
            let cached = try await task.value
            if cached.renewAt > now {
                ready.withLock { $0[platform] = cached }
                return cached.header
            }
            invalidate(platform, ifStill: task)
            return try await authorization(for: platform)
        } catch {
            invalidate(platform, ifStill: task)
            throw error
        }
    }

    /// The header a push to `platform` would get now, when it is known and not due for renewal;
    /// nil when only ``authorization(for:)`` can tell.
    func authorizationNow(for platform: Platform) -> String? {
        let now = Int64(Date().timeIntervalSince1970)
        guard let cached = ready.withLock({ $0[platform] }), cached.renewAt > now else { return nil }
        return cached.header
    }

    /// Forgets a token the push service refused, so the next push fetches a new one.
    func invalidate(_ platform: Platform) {
        _ = cache.withLock { $0.removeValue(forKey: platform) }
        _ = ready.withLock { $0.removeValue(forKey: platform) }
    }

    private func invalidate(_ platform: Platform, ifStill task: Task<Cached, any Error>) {
        cache.withLock { cache in
            if cache[platform] == task { cache[platform] = nil }
        }
        _ = ready.withLock { $0.removeValue(forKey: platform) }
    }

    private func fetch(_ platform: Platform) async throws -> Cached {
        let now = Int64(Date().timeIntervalSince1970)
        switch platform {
        case .apns:
            struct Claims: JWTPayload {
                var iss: String
                var iat: Int64
                func verify(using algorithm: some JWTAlgorithm) async throws {}
            }
            var header = JWTHeader()
            header.kid = settings.apnsKeyID
            let token = try await apnsKeys.value.sign(Claims(iss: settings.apnsTeamID, iat: now), header: header)
            return Cached(header: "bearer \(token)", renewAt: now + Self.apnsTokenAge)
        case .fcm:
            struct Assertion: JWTPayload {
                var iss: String
                var scope: String
                var aud: String
                var iat: Int64
                var exp: Int64
                func verify(using algorithm: some JWTAlgorithm) async throws {}
            }
            let assertion = try await Self.googleKeys.value.sign(
                Assertion(
                    iss: "pushfleet-backend@\(settings.fcmProject).iam.gserviceaccount.com",
                    scope: "https://www.googleapis.com/auth/firebase.messaging",
                    aud: "https://oauth2.googleapis.com/token",
                    iat: now,
                    exp: now + 3600
                )
            )
            return try await exchange(path: "/token", form: ["grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion])
        case .wns:
            return try await exchange(
                path: "/accesstoken.srf",
                form: [
                    "grant_type": "client_credentials", "client_id": settings.wnsClientID, "client_secret": settings.wnsClientSecret,
                    "scope": "notify.windows.com",
                ]
            )
        case .mpns, .webpush:
            throw PushSender.RequestError(description: "mpns is not sent to")
        }
    }

    private struct TokenAnswer: Decodable {
        var access_token: String
        var expires_in: Int64?
    }

    /// An OAuth token request to the push service's token endpoint.
    private func exchange(path: String, form: [String: String]) async throws -> Cached {
        var request = HTTPClientRequest(url: try await baseURL().trimmingSuffix("/") + path)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        let body = form.sorted { $0.key < $1.key }.map { "\($0.key)=\(SharedAccessSignature.formEncode($0.value))" }.joined(separator: "&")
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await client.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 64 * 1024)
        guard response.status == .ok, let answer = try? JSONDecoder().decode(TokenAnswer.self, from: Data(String(buffer: bytes).utf8)) else {
            throw PushSender.RequestError(description: "token endpoint \(path) answered \(response.status.code): \(String(buffer: bytes).prefix(200))")
        }
        let lifetime = min(max(answer.expires_in ?? 3600, 1), 7 * 86_400)
        return Cached(header: "Bearer \(answer.access_token)", renewAt: Int64(Date().timeIntervalSince1970) + max(1, lifetime - Self.refreshMargin))
    }
}
