public import Crypto
public import Foundation
import PushFleetCore

/// Voluntary application server identification (RFC 8292): an ES256 JWT whose `aud` is the push
/// resource's origin, with `exp` at most 24 hours ahead and a `sub` contact, sent as
/// `Authorization: vapid t=<JWT>, k=<public key>`. The draft form some libraries still send with
/// `aesgcm`, `Authorization: WebPush <JWT>` with the key in `Crypto-Key: p256ecdsa=…`, is read too.
public enum VAPID {
    public struct Claims: Sendable, Equatable, Codable {
        public var aud: String
        /// Seconds since 1970.
        public var exp: Int64
        public var sub: String?

        public init(aud: String, exp: Int64, sub: String?) {
            self.aud = aud
            self.exp = exp
            self.sub = sub
        }
    }

    /// Credentials that verified: the signer's public key (uncompressed, 65 bytes) and claims.
    public struct Credential: Sendable, Equatable {
        public var publicKey: Data
        public var claims: Claims
    }

    public enum Rejection: Error, Sendable, Equatable, CustomStringConvertible {
        /// No VAPID credentials on the request.
        case missing
        /// Not a VAPID header, not a JWT, not a P-256 key, or not ES256.
        case malformed(String)
        /// The signature does not verify with the key given beside it.
        case badSignature
        /// `aud` is not the push resource's origin.
        case wrongAudience(String)
        /// `exp` has passed, or is more than 24 hours ahead.
        case badExpiry(String)
        /// No `sub` contact.
        case noSubject

        public var description: String {
            switch self {
            case .missing: "no VAPID credentials"
            case .malformed(let why): "malformed VAPID credentials: \(why)"
            case .badSignature: "the VAPID token's signature does not verify with its key"
            case .wrongAudience(let aud): "the VAPID token's aud \(aud) is not this push service's origin"
            case .badExpiry(let why): "the VAPID token's exp \(why)"
            case .noSubject: "the VAPID token has no sub"
            }
        }
    }

    /// The longest `exp` may reach ahead; a minute more for a sender's clock rounding.
    public static let maxLifetime: Int64 = 86_400
    static let skew: Int64 = 60

    /// The `Authorization` value an application server sends for `endpoint`.
    public static func authorization(
        for endpoint: URL, key: P256.Signing.PrivateKey, subject: String, expiresAt: Int64
    ) throws(Rejection) -> String {
        guard let origin = origin(of: endpoint) else { throw .malformed("\(endpoint) has no origin") }
        let header = Base64URL.encode(Data(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
        guard let claims = try? JSONEncoder().encode(Claims(aud: origin, exp: expiresAt, sub: subject)) else { throw .malformed("claims") }
        let input = header + "." + Base64URL.encode(claims)
        guard let signature = try? key.signature(for: Data(input.utf8)) else { throw .malformed("signing failed") }
        let token = input + "." + Base64URL.encode(signature.rawRepresentation)
        return "vapid t=\(token), k=\(Base64URL.encode(key.publicKey.x963Representation))"
    }

    /// Checks a request's credentials for a push resource at `origin` (``origin(of:)``), at
    /// `now` (seconds since 1970).
    public static func verify(authorization: String?, cryptoKey: String?, origin: String, now: Int64) -> Result<Credential, Rejection> {
        Result { () throws(Rejection) in
            let (token, keyText) = try credentials(authorization: authorization, cryptoKey: cryptoKey)
            guard let key = publicKey(keyText), let publicKey = try? P256.Signing.PublicKey(x963Representation: key) else {
                throw .malformed("k is not an uncompressed P-256 public key")
            }
            let parts = token.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
                let signatureBytes = Base64URL.decode(parts[2])
            else { throw .malformed("t is not a JWT") }
            struct Header: Decodable { var alg: String }
            guard let header = try? JSONDecoder().decode(Header.self, from: headerBytes) else { throw .malformed("the JWT header is not JSON") }
            guard header.alg == "ES256" else { throw .malformed("alg \(header.alg), not ES256") }
            guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes) else {
                throw .malformed("the signature is not 64 bytes of r and s")
            }
            guard publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)) else { throw .badSignature }
            let claims = try decodeClaims(claimBytes)
            try check(claims, origin: origin, now: now).get()
            return Credential(publicKey: key, claims: claims)
        }
    }

    /// What of verified claims depends on the request: the audience, the time, the contact.
    static func check(_ claims: Claims, origin: String, now: Int64) -> Result<Void, Rejection> {
        Result { () throws(Rejection) in
            guard sameOrigin(claims.aud, origin) else { throw .wrongAudience(claims.aud) }
            guard claims.exp > now else { throw .badExpiry("has passed") }
            guard claims.exp <= now + maxLifetime + skew else { throw .badExpiry("is more than 24 hours ahead") }
            guard let sub = claims.sub, !sub.isEmpty else { throw .noSubject }
        }
    }

    /// The bytes of a P-256 public key given as base64url text (a VAPID `k`, a page's
    /// `applicationServerKey`): an uncompressed point on the curve, or nil.
    public static func publicKey(_ text: some StringProtocol) -> Data? {
        guard let key = WebPushText.decode(text), key.count == 65, (try? P256.Signing.PublicKey(x963Representation: key)) != nil else { return nil }
        return key
    }

    /// `scheme://host[:port]` of what a request reached, as `aud` must name it; "" when the
    /// authority is not a host (no `aud` then matches).
    public static func origin(scheme: String, authority: String?) -> String {
        URL(string: "\(scheme)://\(authority ?? "localhost")").flatMap(origin(of:)) ?? ""
    }

    /// `scheme://host[:port]`, lowercased, without a default port: what `aud` names.
    public static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty else { return nil }
        let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
        let port = url.port.flatMap { $0 == defaultPort ? nil : $0 }
        let shownHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(shownHost)" + (port.map { ":\($0)" } ?? "")
    }

    static func sameOrigin(_ aud: String, _ origin: String) -> Bool {
        guard let url = URL(string: aud), let normalised = Self.origin(of: url), url.path.isEmpty || url.path == "/" else { return false }
        return normalised == origin
    }

    /// The token and the key, from either form.
    static func credentials(authorization: String?, cryptoKey: String?) throws(Rejection) -> (token: String, key: String) {
        guard let authorization = authorization?.trimmingCharacters(in: .whitespaces), !authorization.isEmpty else { throw .missing }
        guard let space = authorization.firstIndex(of: " ") else { throw .malformed("no credentials after the scheme") }
        let scheme = authorization[..<space].lowercased()
        let rest = authorization[space...].trimmingCharacters(in: .whitespaces)
        switch scheme {
        case "vapid":
            var parameters: [String: String] = [:]
            for pair in rest.split(separator: ",") {
                guard let equals = pair.firstIndex(of: "=") else { throw .malformed("a parameter without a value") }
                let name = pair[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
                parameters[name] = pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            }
            guard let token = parameters["t"], let key = parameters["k"] else { throw .malformed("vapid needs t= and k=") }
            return (token, key)
        case "webpush":
            let key = cryptoKey.flatMap { HeaderParameters.entries($0).lazy.compactMap { $0["p256ecdsa"] }.first }
            guard let key else { throw .malformed("WebPush needs Crypto-Key: p256ecdsa=") }
            return (rest, key)
        default:
            throw .malformed("scheme \(scheme)")
        }
    }

    static func decodeClaims(_ bytes: Data) throws(Rejection) -> Claims {
        // exp is a NumericDate: a number, which some encoders write with a fraction.
        struct Raw: Decodable {
            var aud: String
            var exp: Double
            var sub: String?
        }
        guard let raw = try? JSONDecoder().decode(Raw.self, from: bytes) else { throw .malformed("the JWT claims need aud and a numeric exp") }
        guard raw.exp.isFinite, abs(raw.exp) < 1e15 else { throw .malformed("exp \(raw.exp)") }
        return Claims(aud: raw.aud, exp: Int64(raw.exp.rounded(.down)), sub: raw.sub)
    }
}
