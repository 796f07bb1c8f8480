public import Foundation
import Crypto
public import NIOSSL
import PushFleetCore
import SwiftASN1
import X509

/// The certificate and key a TLS listener presents: a leaf made at start under a CA made at the
/// same time (whose PEM clients must trust), or a pair the user gave.
public struct TLSIdentity: Sendable {
    /// Leaf first, then any intermediates, as PEM.
    public var certificateChainPEM: String
    public var privateKeyPEM: String
    /// The generated CA's certificate; nil when the user gave the certificate.
    public var authorityPEM: String?
    /// The names the leaf is valid for (as given; the generated leaf adds loopback names).
    public var names: [String]

    /// Names every generated leaf also carries, so tools can reach it on loopback by address.
    static let loopbackNames = ["localhost", "127.0.0.1", "::1"]

    /// Whether a certificate for `names` is valid for `host`: an exact name (without regard to
    /// case), or `*.` covering exactly one label, as clients match them (RFC 6125).
    public static func names(_ names: [String], cover host: String) -> Bool {
        let host = host.lowercased()
        return names.contains { name in
            let name = name.lowercased()
            guard name.hasPrefix("*.") else { return name == host }
            guard let dot = host.firstIndex(of: "."), dot != host.startIndex else { return false }
            return host[dot...] == name.dropFirst(1)
        }
    }

    /// `names` and each of `hosts` they do not cover yet: a generated certificate's names when
    /// this process also answers for `hosts` (the notification hub's namespace, say).
    public static func names(_ names: [String], adding hosts: [String]) -> [String] {
        var all = names
        for host in hosts where !Self.names(all, cover: host) { all.append(host) }
        return all
    }

    public struct InputError: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// A new CA and a leaf under it for `names` (and the loopback names), both ECDSA P-256.
    /// - Parameters:
    ///   - names: DNS names or IP addresses; see `TLSNames.problems(_:)`.
    ///   - now: the start of validity (an hour earlier, to tolerate clock skew).
    ///   - days: how long both stay valid.
    public static func generate(names: [String], now: Date = Date(), days: Int = 825) throws -> TLSIdentity {
        let problems = TLSNames.problems(names)
        guard problems.isEmpty else { throw InputError(problems.joined(separator: "; ")) }
        let notBefore = now.addingTimeInterval(-3600)
        let notAfter = now.addingTimeInterval(Double(max(1, min(days, 3650))) * 86_400)

        let authorityKey = P256.Signing.PrivateKey()
        let authorityName = try DistinguishedName {
            CommonName("pushfleet mock push service CA \(serialHex())")
            OrganizationName("pushfleet")
        }
        let authorityKeyID = keyIdentifier(authorityKey.publicKey)
        let authority = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(authorityKey.publicKey),
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: authorityName,
            subject: authorityName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(keyIdentifier: authorityKeyID)
            },
            issuerPrivateKey: .init(authorityKey)
        )

        let leafKey = P256.Signing.PrivateKey()
        var unique: [String] = []
        for name in names + loopbackNames where !unique.contains(name) { unique.append(name) }
        let alternativeNames = unique.map { name -> GeneralName in
            if let bytes = TLSNames.ipAddressBytes(name) { return .ipAddress(ASN1OctetString(contentBytes: bytes[...])) }
            return .dnsName(name)
        }
        let leaf = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(leafKey.publicKey),
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: authorityName,
            subject: try DistinguishedName {
                CommonName(names.first { TLSNames.ipAddressBytes($0) == nil } ?? "localhost")
                OrganizationName("pushfleet")
            },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(alternativeNames)
                SubjectKeyIdentifier(keyIdentifier: keyIdentifier(leafKey.publicKey))
                AuthorityKeyIdentifier(keyIdentifier: authorityKeyID)
            },
            issuerPrivateKey: .init(authorityKey)
        )
        return TLSIdentity(
            certificateChainPEM: try leaf.serializeAsPEM().pemString + "\n",
            privateKeyPEM: leafKey.pemRepresentation + "\n",
            authorityPEM: try authority.serializeAsPEM().pemString + "\n",
            names: names
        )
    }

    /// A certificate chain and key the user gave, as PEM files; checked by loading them.
    public static func load(certificateFile: String, keyFile: String) throws -> TLSIdentity {
        func read(_ path: String, _ what: String) throws -> String {
            do { return try String(contentsOfFile: path, encoding: .utf8) } catch {
                throw InputError("cannot read the TLS \(what) \(path): \(error.localizedDescription)")
            }
        }
        let identity = TLSIdentity(
            certificateChainPEM: try read(certificateFile, "certificate"),
            privateKeyPEM: try read(keyFile, "key"),
            authorityPEM: nil,
            names: []
        )
        do { _ = try identity.serverConfiguration() } catch {
            throw InputError("\(certificateFile) / \(keyFile) are not a usable PEM certificate chain and key: \(error)")
        }
        return identity
    }

    /// Client certificates: not asked for, or asked for and optional (verified against
    /// `trustRoots` when given, else any certificate the client proves it holds the key of).
    public enum ClientCertificates: Sendable {
        case none
        case optional(trustRootsPEM: String?)
    }

    /// A server configuration offering HTTP/2 and HTTP/1.1 by ALPN.
    public func serverConfiguration(clientCertificates: ClientCertificates = .none) throws -> TLSConfiguration {
        let chain = try NIOSSLCertificate.fromPEMBytes(Array(certificateChainPEM.utf8))
        guard !chain.isEmpty else { throw InputError("the certificate file holds no certificate") }
        let key = try NIOSSLPrivateKey(bytes: Array(privateKeyPEM.utf8), format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) },
            privateKey: .privateKey(key)
        )
        configuration.applicationProtocols = ["h2", "http/1.1"]
        configuration.minimumTLSVersion = .tlsv12
        if case .optional(let roots) = clientCertificates {
            configuration.certificateVerification = .optionalVerification
            if let roots {
                configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(roots.utf8)))
            }
        }
        return configuration
    }

    /// Writes the CA's PEM (mode 0644: it is public) and returns the path.
    public func writeAuthority(to path: String) throws {
        guard let authorityPEM else { throw InputError("there is no generated CA to write (the certificate was given)") }
        do {
            try Data(authorityPEM.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw InputError("cannot write the CA file \(path): \(error.localizedDescription)")
        }
    }

    private static func keyIdentifier(_ key: P256.Signing.PublicKey) -> ArraySlice<UInt8> {
        ArraySlice(Insecure.SHA1.hash(data: key.x963Representation))
    }

    private static func serialHex() -> String {
        String(UInt32.random(in: 0...UInt32.max), radix: 16)
    }
}
