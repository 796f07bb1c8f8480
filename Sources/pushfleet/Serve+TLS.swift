import ArgumentParser
import Foundation
import PushFleetCore
import PushFleetMockPush
import PushFleetServerSupport

/// `pushfleet serve`'s options for the push service's TLS listener and provider credentials.
struct ServeTLSOptions: ParsableArguments {
    @Option(help: "Also serve the push service over TLS here (HTTP/2 and HTTP/1.1 by ALPN), e.g. 127.0.0.1:443.")
    var pnsTlsListen: String?
    @Option(help: "Comma-separated host names (or IPs) the generated certificate is for (default: Apple's, Google's and Microsoft's push hosts).")
    var tlsNames: String?
    @Option(help: "Present this PEM certificate chain instead of a generated one (with --tls-key).") var tlsCert: String?
    @Option(help: "The PEM private key of --tls-cert.") var tlsKey: String?
    @Option(help: "Where to write the generated CA certificate (PEM) that clients must trust.") var tlsCaOut: String?
    @Option(help: "APNs client certificates must chain to these PEM CAs (default: any client certificate is accepted).")
    var apnsClientCa: String?
    @Option(help: "An APNs signing key whose tokens are verified: KEYID[:TEAMID]=PATH.p8 (repeatable; default: structure and claims only).")
    var apnsKey: [String] = []
    @Option(help: "Comma-separated bundle ids apns-topic may name (default: any).") var apnsTopics: String?
    @Option(help: "A service account JSON key file whose assertions are verified (repeatable; default: structure and claims only).")
    var fcmServiceAccount: [String] = []
    @Option(help: "A WNS client allowed to get tokens: ID=SECRET (repeatable; default: any).") var wnsClient: [String] = []

    /// The provider credentials the push service accepts.
    func providerAuth() throws -> ProviderAuthConfiguration {
        var auth = ProviderAuthConfiguration()
        do {
            auth.apnsKeys = try apnsKey.map(ProviderAuthConfiguration.APNsKey.parse)
            auth.serviceAccounts = try fcmServiceAccount.map { try .load(jsonFile: $0) }
            auth.wnsClients = try wnsClient.map(ProviderAuthConfiguration.WNSClient.parse)
        } catch let error as ProviderAuthError {
            throw ValidationError(error.description)
        }
        auth.apnsTopics = Self.list(apnsTopics)
        let problems = auth.problems()
        guard problems.isEmpty else { throw ValidationError("--apns-topics: " + problems.joined(separator: "; ")) }
        return auth
    }

    /// The TLS listener, or nil without --pns-tls-listen. A generated certificate covers
    /// `hubHost` (the notification hub's namespace) too, unless --tls-names says otherwise.
    func server(limits: ServerLimits, hubHost: String? = nil) throws -> MockPushServer.TLS? {
        guard let pnsTlsListen else {
            guard tlsCert == nil, tlsKey == nil, tlsNames == nil, tlsCaOut == nil, apnsClientCa == nil else {
                throw ValidationError("the --tls-* and --apns-client-ca options need --pns-tls-listen")
            }
            return nil
        }
        let listen: ListenAddress
        do { listen = try ListenAddress(parsing: pnsTlsListen) } catch { throw ValidationError("--pns-tls-listen: \(error)") }
        let identity: TLSIdentity
        do {
            switch (tlsCert, tlsKey) {
            case (let cert?, let key?):
                guard tlsNames == nil, tlsCaOut == nil else {
                    throw ValidationError("--tls-names and --tls-ca-out are for a generated certificate, not with --tls-cert")
                }
                identity = try TLSIdentity.load(certificateFile: cert, keyFile: key)
            case (nil, nil):
                identity = try TLSIdentity.generate(names: tlsNames.map(Self.list) ?? TLSIdentity.names(TLSNames.defaults, adding: hubHost.map { [$0] } ?? []))
            default:
                throw ValidationError("--tls-cert and --tls-key go together")
            }
        } catch let error as TLSIdentity.InputError {
            throw ValidationError("TLS: \(error)")
        }
        var clients = TLSIdentity.ClientCertificates.optional(trustRootsPEM: nil)
        if let apnsClientCa {
            guard let pem = try? String(contentsOfFile: apnsClientCa, encoding: .utf8) else {
                throw ValidationError("--apns-client-ca: cannot read \(apnsClientCa)")
            }
            clients = .optional(trustRootsPEM: pem)
        }
        return MockPushServer.TLS(listen: listen, identity: identity, clientCertificates: clients, limits: limits)
    }

    /// Where the CA goes: the flag, else a file in the temporary directory.
    var caPath: String {
        tlsCaOut ?? FileManager.default.temporaryDirectory.appendingPathComponent("pushfleet-mock-ca.pem").path
    }

    /// Writes the CA and a bundle of the system's CAs plus it; returns (ca, bundle) paths.
    static func writeAuthority(_ identity: TLSIdentity, to path: String) throws -> (ca: String, bundle: String) {
        do { try identity.writeAuthority(to: path) } catch let error as TLSIdentity.InputError {
            throw ValidationError("--tls-ca-out: \(error)")
        }
        let bundle = (path.hasSuffix(".pem") ? String(path.dropLast(4)) : path) + "-bundle.pem"
        let candidates = [ProcessInfo.processInfo.environment["SSL_CERT_FILE"], "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"]
        let system = candidates.compactMap { $0 }.lazy.compactMap { try? String(contentsOfFile: $0, encoding: .utf8) }.first ?? ""
        let authority = identity.authorityPEM ?? ""
        let text = system.contains(authority) ? system : (system.isEmpty || system.hasSuffix("\n") ? system : system + "\n") + authority
        do { try Data(text.utf8).write(to: URL(fileURLWithPath: bundle), options: .atomic) } catch {
            throw ValidationError("cannot write the CA bundle \(bundle): \(error.localizedDescription)")
        }
        return (path, bundle)
    }

    /// What a backend must set to send here with its platform's own libraries.
    static func instructions(url: String, names: [String], hubHost: String? = nil, ca: String?, bundle: String?) -> [String] {
        let port = url.split(separator: ":").last.map(String.init) ?? "443"
        func hosts(_ suffixes: [String], except: [String] = []) -> String {
            let matching = names.filter { name in suffixes.contains { name.hasSuffix($0) } && !except.contains { name.hasSuffix($0) } }
                .map { $0.hasPrefix("*.") ? "wns2-pf" + $0.dropFirst(1) : $0 }
            return matching.isEmpty ? "(none of --tls-names)" : "127.0.0.1 " + matching.joined(separator: " ")
        }
        var lines = [
            "push TLS:     \(url)  (HTTP/2 and HTTP/1.1)",
            "To send here with a platform's own libraries, unchanged:",
            "  APNs  hosts: \(hosts(["push.apple.com"], except: ["web.push.apple.com"]))",
            "        token auth (an ES256 .p8 key, kid and team id) or a client certificate; apns-topic required",
            "  FCM   hosts: \(hosts(["googleapis.com"]))",
            "        a service-account JSON: its JWT assertion is exchanged at /token; the project is checked against the account's",
            "  WNS   hosts: \(hosts(["login.live.com", "notify.windows.com"]))",
            "        client credentials at /accesstoken.srf; a device's channel URI from POST https://<notify host>/wns/channels",
            "  Web Push hosts: \(hosts(["fcm.googleapis.com", "updates.push.services.mozilla.com", "web.push.apple.com", "notify.windows.com"]))",
            "        VAPID (RFC 8292); a browser's endpoint from POST https://<host>/webpush/subscriptions",
        ]
        if let hubHost {
            let covered = TLSIdentity.names(names, cover: hubHost)
            lines += [
                "  Hub   hosts: \(covered ? "127.0.0.1 \(hubHost)" : "(none of --tls-names covers \(hubHost))")",
                "        the hub connection string below, as written (Endpoint=sb://\(hubHost)/)",
            ]
        }
        if port != "443" {
            lines.append("  Libraries connect to port 443: listen on :443, or forward 443 to \(port).")
        }
        if let ca, let bundle {
            lines += [
                "CA certificate: \(ca)",
                "CA bundle (system CAs + this CA): \(bundle)",
                "Trust it:",
                "  Python  SSL_CERT_FILE=\(bundle) REQUESTS_CA_BUNDLE=\(bundle)",
                "  Node    NODE_EXTRA_CA_CERTS=\(ca)",
                "  Java    keytool -importcert -noprompt -alias pushfleet-mock -file \(ca) -keystore mock.jks -storepass changeit",
                "          java -Djavax.net.ssl.trustStore=mock.jks -Djavax.net.ssl.trustStorePassword=changeit …",
                "  .NET    (Linux) cp \(ca) /usr/local/share/ca-certificates/pushfleet-mock.crt && update-ca-certificates,",
                "          or SSL_CERT_FILE=\(bundle)",
                "  Go      SSL_CERT_FILE=\(bundle)",
                "  curl    curl --http2 --cacert \(ca) …   openssl s_client -alpn h2 -CAfile \(ca) …",
            ]
        } else {
            lines.append("The certificate was given (--tls-cert): clients must trust its issuer.")
        }
        return lines
    }

    private static func list(_ text: String?) -> [String] {
        (text ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}
