public import ArgumentParser
import Foundation
import JWTKit
import PushFleetBackend
import PushFleetCore
import PushFleetEngine

/// The reference backend's login tokens (HS256 JWTs, checked on every call a device makes):
/// checks per CPU-second of its verifier beside jwt-kit's `JWTKeyCollection` called directly on
/// the same token with the same key and expiry rule, so what the backend adds shows. Each must
/// accept the other's tokens first, so the two do the same job. (Before the backend verified with
/// jwt-kit, its own HMAC verifier measured 0.46× of jwt-kit here; docs/performance.md.)
public struct TokenBench: AsyncParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "tokens",
        abstract: "Login token checks per CPU-second: the reference backend's verifier beside jwt-kit called directly, on the same tokens."
    )

    @Option(help: "Checks per verifier (1,000 to 10,000,000).") var checks = 300_000

    public init() {}

    public func validate() throws {
        guard (1_000...10_000_000).contains(checks) else { throw ValidationError("--checks must be between 1,000 and 10,000,000, got \(checks)") }
    }

    /// The claims the reference backend writes, as jwt-kit reads them.
    struct Claims: JWTPayload {
        var sub: String
        var iat: Int64
        var exp: Int64

        func verify(using algorithm: some JWTAlgorithm) async throws {
            guard !sub.isEmpty, exp > Int64(Date().timeIntervalSince1970) else { throw JWTError.generic(identifier: "claims", reason: "expired") }
        }
    }

    public func run() async throws {
        let secret = Data((0..<32).map { UInt8($0) })
        let now = Int64(Date().timeIntervalSince1970)
        let own = TokenSigner(secret: secret, lifetime: .seconds(3_600))
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)

        // The same job: each accepts the other's tokens, and refuses an expired one.
        let ownToken = try await own.issue(user: "bench-user-0001", now: now)
        let kitToken = try await keys.sign(Claims(sub: "bench-user-0001", iat: now, exp: now + 3_600))
        guard try await keys.verify(ownToken, as: Claims.self).sub == "bench-user-0001" else { throw BenchFailure("jwt-kit read another user") }
        guard (try? await own.verify(kitToken, now: now)) == "bench-user-0001" else { throw BenchFailure("the backend's verifier refused jwt-kit's token") }
        let expired = try await own.issue(user: "bench-user-0001", now: now - 7_200)
        guard (try? await keys.verify(expired, as: Claims.self)) == nil else { throw BenchFailure("jwt-kit accepted an expired token") }

        let ownRate = try await rate { _ = try await own.verify(ownToken, now: now) }
        let kitRate = try await rate { _ = try await keys.verify(ownToken, as: Claims.self) }
        Bench.printFigures(
            "Login token checks (\(checks.grouped) each, one task)",
            [
                ("reference backend checks per CPU-second", ownRate.grouped),
                ("jwt-kit JWTKeyCollection, called directly", kitRate.grouped),
                ("reference backend / jwt-kit", String(format: "%.2f×", Double(ownRate) / Double(max(kitRate, 1)))),
            ]
        )
    }

    private func rate(_ check: () async throws -> Void) async throws -> Int {
        let started = CPUTime.own()
        for _ in 0..<checks { try await check() }
        return Int(Double(checks) / max(CPUTime.own() - started, 1e-9))
    }
}
