import Foundation
import Crypto
import JWTKit

/// Which provider credentials the mock push service accepts. Every platform authenticates its
/// senders as the real service does; what is configured decides how strictly:
/// - APNs: ES256 provider tokens, verified against the keys given here by key id, or checked for
///   structure and claims only when none are given; or a TLS client certificate.
/// - FCM: OAuth access tokens minted by the mock's token endpoint for a service-account JWT
///   assertion, verified against the accounts given here, or structure and claims only.
/// - WNS: access tokens minted by the mock's `/accesstoken.srf` for the clients given here, or
///   for any client id and secret when none are.
public struct ProviderAuthConfiguration: Sendable, Equatable {
    /// The public half of an APNs signing key (`AuthKey_<KEYID>.p8`).
    public struct APNsKey: Sendable, Equatable {
        public var keyID: String
        /// The team the key belongs to; nil accepts any `iss`.
        public var teamID: String?
        public var publicKeyPEM: String

        public init(keyID: String, teamID: String?, publicKeyPEM: String) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKeyPEM = publicKeyPEM
        }

        /// `KEYID[:TEAMID]=PATH`, PATH a `.p8` file (its private key; only the public half is
        /// kept) or a PEM public key.
        public static func parse(_ spec: String) throws -> APNsKey {
            guard let equals = spec.firstIndex(of: "=") else {
                throw ProviderAuthError("'\(spec)' is not KEYID[:TEAMID]=PATH")
            }
            let ids = spec[..<equals].split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard (1...2).contains(ids.count), ids.allSatisfy(APNsProviderToken.isPrintableID) else {
                throw ProviderAuthError("'\(spec)': key and team ids are 1–64 printable characters")
            }
            let path = String(spec[spec.index(after: equals)...])
            let pem = try readFile(path, "APNs key")
            let publicKey: P256.Signing.PublicKey
            if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
                publicKey = key.publicKey
            } else if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) {
                publicKey = key
            } else {
                throw ProviderAuthError("\(path) holds no P-256 key in PEM (an APNs .p8 file is one)")
            }
            return APNsKey(keyID: ids[0], teamID: ids.count == 2 ? ids[1] : nil, publicKeyPEM: publicKey.pemRepresentation)
        }
    }

    /// A Google service account, from its JSON key file.
    public struct ServiceAccount: Sendable, Equatable {
        public var email: String
        public var projectID: String?
        public var publicKeyPEM: String

        public init(email: String, projectID: String?, publicKeyPEM: String) {
            self.email = email
            self.projectID = projectID
            self.publicKeyPEM = publicKeyPEM
        }

        /// Reads `client_email`, `project_id` and the public half of `private_key`.
        public static func load(jsonFile path: String) throws -> ServiceAccount {
            struct File: Decodable {
                var type: String?
                var client_email: String?
                var project_id: String?
                var private_key: String?
            }
            let text = try readFile(path, "service account")
            guard let file = try? JSONDecoder().decode(File.self, from: Data(text.utf8)), file.type == "service_account",
                let email = file.client_email, let pem = file.private_key
            else {
                throw ProviderAuthError("\(path) is not a service account key file (type, client_email and private_key are needed)")
            }
            guard let key = try? Insecure.RSA.PrivateKey(pem: pem) else {
                throw ProviderAuthError("\(path): private_key is not an RSA key in PEM")
            }
            return ServiceAccount(email: email, projectID: file.project_id, publicKeyPEM: key.publicKey.pemRepresentation)
        }
    }

    /// A WNS client (package SID and secret).
    public struct WNSClient: Sendable, Equatable {
        public var id: String
        public var secret: String

        public init(id: String, secret: String) {
            self.id = id
            self.secret = secret
        }

        /// `ID=SECRET` (the id, e.g. `ms-app://S-1-15-2-…`, holds colons).
        public static func parse(_ spec: String) throws -> WNSClient {
            guard let equals = spec.lastIndex(of: "="), equals != spec.startIndex, spec.index(after: equals) != spec.endIndex else {
                throw ProviderAuthError("'\(spec)' is not ID=SECRET")
            }
            return WNSClient(id: String(spec[..<equals]), secret: String(spec[spec.index(after: equals)...]))
        }
    }

    public var apnsKeys: [APNsKey]
    /// Bundle ids pushes may name in `apns-topic` (suffixes such as `.voip` allowed); empty: any.
    public var apnsTopics: [String]
    public var serviceAccounts: [ServiceAccount]
    public var wnsClients: [WNSClient]
    /// Lifetime of the access tokens the mock mints for Google (Google's is an hour) and WNS (a day).
    public var googleTokenLifetime: Duration
    public var wnsTokenLifetime: Duration

    public init(
        apnsKeys: [APNsKey] = [],
        apnsTopics: [String] = [],
        serviceAccounts: [ServiceAccount] = [],
        wnsClients: [WNSClient] = [],
        googleTokenLifetime: Duration = .seconds(3600),
        wnsTokenLifetime: Duration = .seconds(86_400)
    ) {
        self.apnsKeys = apnsKeys
        self.apnsTopics = apnsTopics
        self.serviceAccounts = serviceAccounts
        self.wnsClients = wnsClients
        self.googleTokenLifetime = googleTokenLifetime
        self.wnsTokenLifetime = wnsTokenLifetime
    }

    /// The bounds for the token lifetimes (checked where they enter).
    public static let tokenLifetimeRange: ClosedRange<Duration> = .seconds(1)...(.seconds(7 * 86_400))

    /// Every value out of range; empty when usable.
    public func problems() -> [String] {
        var problems: [String] = []
        for (name, value) in [("Google token lifetime", googleTokenLifetime), ("WNS token lifetime", wnsTokenLifetime)]
        where !Self.tokenLifetimeRange.contains(value) {
            problems.append("\(name) must be between 1s and 7 days")
        }
        for topic in apnsTopics where topic.isEmpty || topic.utf8.count > 255 || topic.contains(where: \.isWhitespace) {
            problems.append("'\(topic)' is not a bundle id")
        }
        return problems
    }
}

public struct ProviderAuthError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

private func readFile(_ path: String, _ what: String) throws -> String {
    do { return try String(contentsOfFile: path, encoding: .utf8) } catch {
        throw ProviderAuthError("cannot read the \(what) file \(path): \(error.localizedDescription)")
    }
}
