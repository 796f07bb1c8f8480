import Foundation
import HTTPTypes
import JWTKit
import PushFleetServerSupport

/// Authenticates senders for every platform: checks APNs provider tokens and client
/// certificates, mints and checks Google's and WNS's access tokens. The pure rules are in
/// ``APNsProviderToken``, ``APNsTokenSession``, ``GoogleOAuth`` and ``WNSOAuth``; this type holds
/// the keys and the minted tokens and does the signature checks.
final class ProviderAuthority: Sendable {
    let configuration: ProviderAuthConfiguration
    /// Seconds since the epoch.
    let now: @Sendable () -> Int64
    let googleTokens = AccessTokenStore<GoogleOAuth.Grant>(prefix: "ya29.pf-")
    let wnsTokens = AccessTokenStore<WNSOAuth.Grant>(prefix: "EwB.pf-")
    /// Nil when no APNs key is configured: tokens are then checked for structure and claims only.
    /// (Key collections are actors, filled once; the task hands over the filled one.)
    private let apnsKeys: Task<JWTKeyCollection, Never>?
    private let googleKeys: [String: Task<JWTKeyCollection, Never>]
    /// The credential of the push service's own notification hub, which calls the endpoints in
    /// process (a real hub holds APNs, FCM and WNS credentials of its own). Random per process and
    /// never sent on a wire, so no outside sender can present it.
    let inProcessBearer = "pf-hub-" + (0..<4).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }.joined()

    enum APNsOutcome: Equatable {
        /// Allowed; `bundles` are the bundle ids its topics may name (empty: any).
        case authorized(bundles: [String])
        case rejected(HTTPResponse.Status, String)
    }

    /// Keys that do not parse are left out (the configuration's loaders checked them already),
    /// so tokens signed with them are refused.
    init(configuration: ProviderAuthConfiguration, now: @escaping @Sendable () -> Int64) {
        self.configuration = configuration
        self.now = now
        if configuration.apnsKeys.isEmpty {
            apnsKeys = nil
        } else {
            let parsed = configuration.apnsKeys.compactMap { key in
                (try? ES256PublicKey(pem: key.publicKeyPEM)).map { (JWKIdentifier(string: key.keyID), $0) }
            }
            apnsKeys = Task {
                let keys = JWTKeyCollection()
                for (kid, key) in parsed { await keys.add(ecdsa: key, kid: kid) }
                return keys
            }
        }
        var googleKeys: [String: Task<JWTKeyCollection, Never>] = [:]
        for account in configuration.serviceAccounts {
            guard let publicKey = try? Insecure.RSA.PublicKey(pem: account.publicKeyPEM) else { continue }
            googleKeys[account.email] = Task { await JWTKeyCollection().add(rsa: publicKey, digestAlgorithm: .sha256) }
        }
        self.googleKeys = googleKeys
    }

    // MARK: APNs

    /// The sender of an APNs request: its connection's client certificate, else the bearer token.
    func authenticateAPNs(authorization: String?, connection: ConnectionState?) async -> APNsOutcome {
        switch precheckAPNs(authorization: authorization, connection: connection) {
        case .decided(let outcome):
            return outcome
        case .adopt(let text, let token, let session):
            if let apnsKeys {
                guard let key = configuration.apnsKeys.first(where: { $0.keyID == token.identity.keyID }),
                    key.teamID == nil || key.teamID == token.identity.teamID,
                    (try? await apnsKeys.value.verify(text, as: APNsProviderToken.Claims.self)) != nil
                else { return .rejected(.forbidden, "InvalidProviderToken") }
            }
            return adopt(token, on: session)
        }
    }

    /// The same as ``authenticateAPNs(authorization:connection:)`` when it needs no wait: nil
    /// when a token new to its connection must have its signature checked against a configured
    /// key first.
    func authenticateAPNsNow(authorization: String?, connection: ConnectionState?) -> APNsOutcome? {
        switch precheckAPNs(authorization: authorization, connection: connection) {
        case .decided(let outcome):
            return outcome
        case .adopt(_, let token, let session):
            guard apnsKeys == nil else { return nil }
            return adopt(token, on: session)
        }
    }

    private enum APNsPrecheck {
        case decided(APNsOutcome)
        /// A well-formed token new to the connection: its signature, then the connection's rules.
        case adopt(text: String, token: APNsProviderToken, session: ConnectionState)
    }

    private func precheckAPNs(authorization: String?, connection: ConnectionState?) -> APNsPrecheck {
        if let der = connection?.peerCertificateDER {
            // Apple ignores the authorization header on a certificate-authenticated connection.
            guard let bundles = APNsTopics.bundles(ofCertificate: der) else { return .decided(.rejected(.forbidden, "BadCertificate")) }
            return .decided(.authorized(bundles: bundles))
        }
        guard let authorization else { return .decided(.rejected(.forbidden, "MissingProviderToken")) }
        // The token is looked at in place: a connection's token is the same on every request,
        // and a copy of it cost an allocation a push.
        guard let text = Self.bearerText(authorization) else { return .decided(.rejected(.forbidden, "InvalidProviderToken")) }
        if text == inProcessBearer { return .decided(.authorized(bundles: [])) }
        let now = now()
        let session = connection ?? ConnectionState(isTLS: false)
        switch session.withAttachment(APNsTokenSession(), { $0.step(for: text, now: now) }) {
        case .accepted:
            return .decided(.authorized(bundles: configuration.apnsTopics))
        case .expired:
            return .decided(.rejected(.forbidden, "ExpiredProviderToken"))
        case .verify:
            break
        }
        let token = String(text)
        switch APNsProviderToken.inspect(token, now: now) {
        case .success(let inspected): return .adopt(text: token, token: inspected, session: session)
        case .failure(let failure): return .decided(.rejected(.forbidden, failure.rawValue))
        }
    }

    private func adopt(_ token: APNsProviderToken, on session: ConnectionState) -> APNsOutcome {
        switch session.withAttachment(APNsTokenSession(), { $0.adopt(token) }) {
        case .adopted: .authorized(bundles: configuration.apnsTopics)
        case .tooManyUpdates: .rejected(.tooManyRequests, "TooManyProviderTokenUpdates")
        case .otherTeam: .rejected(.forbidden, "InvalidProviderToken")
        }
    }

    // MARK: Google

    /// Answers a token request: an access token and its lifetime, or Google's error.
    func issueGoogleToken(form: [String: String]) async -> Result<(token: String, expiresIn: Int64), GoogleOAuth.Failure> {
        let now = now()
        let assertion: GoogleOAuth.Assertion
        switch GoogleOAuth.check(form: form, now: now) {
        case .success(let checked): assertion = checked
        case .failure(let failure): return .failure(failure)
        }
        var project = GoogleOAuth.project(ofAccount: assertion.account)
        if !configuration.serviceAccounts.isEmpty {
            guard let account = configuration.serviceAccounts.first(where: { $0.email == assertion.account }),
                let keys = googleKeys[account.email]
            else { return .failure(.invalidGrant("Invalid grant: account not found")) }
            guard (try? await keys.value.verify(assertion.text, as: GoogleOAuth.Claims.self)) != nil else { return .failure(.signature) }
            project = account.projectID ?? project
        }
        let lifetime = configuration.googleTokenLifetime.components.seconds
        let grant = GoogleOAuth.Grant(account: assertion.account, scopes: assertion.scopes, project: project)
        guard let token = googleTokens.mint(grant, lifetime: lifetime, now: now) else {
            return .failure(GoogleOAuth.Failure(error: "temporarily_unavailable", error_description: "Too many live access tokens."))
        }
        // Google answers a second less than the token's life, as clients refresh ahead of it.
        return .success((token, max(1, lifetime - 1)))
    }

    func googleGrant(authorization: String?) -> AccessTokenStore<GoogleOAuth.Grant>.Lookup {
        guard let token = Self.bearer(authorization) else { return .unknown }
        if token == inProcessBearer { return .valid(.init(account: "hub", scopes: Array(GoogleOAuth.messagingScopes), project: nil)) }
        return googleTokens.lookup(token, now: now())
    }

    // MARK: WNS

    func issueWNSToken(form: [String: String]) -> Result<(token: String, expiresIn: Int64), WNSOAuth.Failure> {
        switch WNSOAuth.check(form: form, clients: configuration.wnsClients) {
        case .failure(let failure):
            return .failure(failure)
        case .success(let grant):
            let lifetime = configuration.wnsTokenLifetime.components.seconds
            guard let token = wnsTokens.mint(grant, lifetime: lifetime, now: now()) else {
                return .failure(WNSOAuth.Failure(error: "temporarily_unavailable", error_description: "Too many live access tokens."))
            }
            return .success((token, lifetime))
        }
    }

    func wnsGrant(authorization: String?) -> AccessTokenStore<WNSOAuth.Grant>.Lookup {
        guard let token = Self.bearer(authorization) else { return .unknown }
        if token == inProcessBearer { return .valid(.init(clientID: "hub")) }
        return wnsTokens.lookup(token, now: now())
    }

    /// The token of an `Authorization: Bearer …` header (scheme case-insensitive).
    /// The credentials after a `Bearer ` scheme (any case), compared as bytes: once per push.
    static func bearer(_ authorization: String?) -> String? {
        bearerText(authorization).map(String.init)
    }

    /// ``bearer(_:)``'s token as a part of `authorization`, not copied out.
    static func bearerText(_ authorization: String?) -> Substring? {
        guard let authorization else { return nil }
        let utf8 = authorization.utf8
        guard utf8.count > 7, utf8.prefix(7).elementsEqual("bearer ".utf8, by: { $1 == 0x20 ? $0 == 0x20 : ($0 | 0x20) == $1 }) else { return nil }
        let after = utf8.index(utf8.startIndex, offsetBy: 7)
        // An ASCII byte never joins the space before it: no walk by characters is needed.
        if utf8[after] < 0x80 { return Substring(utf8[after...]) }
        // The scheme is its own seven characters: a mark combining with its space makes it another.
        let rest = authorization.dropFirst(7)
        guard rest.utf8.count == utf8.count - 7 else { return nil }
        return rest
    }
}
