package import AsyncHTTPClient
package import Foundation
import NIOCore
package import NIOHTTP1
package import NIOSSL
import PushFleetEmbedded
package import PushFleetMockPush
package import PushFleetServerSupport

/// The embedded system with the push service's TLS listener on an ephemeral loopback port, and
/// clients that trust its generated CA.
package struct TLSTestSystem: Sendable {
    package let system: TestSystem
    /// `https://127.0.0.1:PORT`
    package let tlsURL: String
    package let port: Int
    package let identity: TLSIdentity
    package let caFile: String

    package static func run<T: Sendable>(
        providerAuth: ProviderAuthConfiguration = .init(),
        clientCertificates: TLSIdentity.ClientCertificates = .optional(trustRootsPEM: nil),
        limits: ServerLimits = .init(),
        _ body: @escaping @Sendable (TLSTestSystem) async throws -> T
    ) async throws -> T {
        let identity = try TLSIdentity.generate(names: ["api.push.apple.com", "fcm.googleapis.com", "*.notify.windows.com", "updates.push.services.mozilla.com", "web.push.apple.com"])
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushService.providerAuth = providerAuth
        configuration.pushServer.tls = .init(
            listen: .init(host: "127.0.0.1", port: 0), identity: identity, clientCertificates: clientCertificates, limits: limits
        )
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfleet-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let caFile = directory.appendingPathComponent("ca.pem").path
        try identity.writeAuthority(to: caFile)
        return try await TestSystem.runEmbedded(configuration) { embedded, system in
            let bound = try await embedded.pushServer!.boundTLS.value()
            return try await body(
                TLSTestSystem(system: system, tlsURL: "https://127.0.0.1:\(bound.port)", port: bound.port, identity: identity, caFile: caFile)
            )
        }
    }

    /// A client configuration that trusts the CA (and presents `certificate` when given).
    package func clientTLS(certificate: (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)? = nil) throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(identity.authorityPEM!.utf8)))
        if let certificate {
            tls.certificateChain = certificate.chain.map { .certificate($0) }
            tls.privateKey = .privateKey(certificate.key)
        }
        return tls
    }

    /// Runs `body` with an HTTP client of its own that trusts the CA and reaches `host` (checked
    /// against the certificate) on the TLS port.
    package func withClient<T>(
        host: String = "api.push.apple.com",
        http1Only: Bool = false,
        certificate: (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)? = nil,
        _ body: (HTTPClient, String) async throws -> T
    ) async throws -> T {
        var configuration = HTTPClient.Configuration(tlsConfiguration: try clientTLS(certificate: certificate))
        configuration.dnsOverride = [host: "127.0.0.1"]
        configuration.httpVersion = http1Only ? .http1Only : .automatic
        // A TLS handshake needs the servers' event loops, which the whole suite shares: at its
        // start, on a loaded machine, one took longer than the client's default 10 s.
        configuration.timeout.connect = .seconds(60)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            let result = try await body(client, "https://\(host):\(port)")
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }
}

extension HTTPClient {
    /// One request; status, version, headers and body.
    package func send(
        _ method: HTTPMethod, _ url: String, headers: [(String, String)] = [], body: Data? = nil
    ) async throws -> (status: Int, version: HTTPVersion, headers: HTTPHeaders, text: String) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), response.version, response.headers, String(buffer: bytes))
    }
}
