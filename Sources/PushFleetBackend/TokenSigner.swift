import Crypto
import Foundation

/// Issues and checks the backend's login tokens: compact JWTs (HS256) carrying the user and an
/// expiry, signed with HMAC-SHA256 from swift-crypto.
struct TokenSigner: Sendable {
    private struct Header: Codable {
        var alg = "HS256"
        var typ = "JWT"
    }

    private struct Claims: Codable {
        var sub: String
        var iat: Int64
        var exp: Int64
    }

    enum VerifyError: Error, Equatable {
        case malformed
        case badSignature
        case expired
    }

    private let key: SymmetricKey
    let lifetime: Duration

    init(secret: Data, lifetime: Duration) {
        self.key = SymmetricKey(data: secret)
        self.lifetime = lifetime
    }

    /// The header every token carries, encoded once.
    private static let headerSegment = encode(Header())

    /// - Parameter now: seconds since the epoch.
    func issue(user: String, now: Int64) -> String {
        let header = Self.headerSegment
        let claims = Self.encode(Claims(sub: user, iat: now, exp: now + lifetime.components.seconds))
        let signingInput = header + "." + claims
        return signingInput + "." + Self.base64URL(Data(HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: key)))
    }

    /// Returns the user a valid, unexpired token names.
    func verify(_ token: String, now: Int64) throws(VerifyError) -> String {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let signature = Self.data(base64URL: parts[2]) else { throw .malformed }
        // The header this signer writes is known; another is read to see whether it says HS256.
        if parts[0] != Self.headerSegment {
            guard let headerData = Self.data(base64URL: parts[0]),
                let header = try? JSONDecoder().decode(Header.self, from: headerData), header.alg == "HS256"
            else { throw .malformed }
        }
        let signingInput = Data(token.utf8[token.utf8.startIndex..<parts[1].utf8.endIndex])
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signingInput, using: key) else {
            throw .badSignature
        }
        guard let claimsData = Self.data(base64URL: parts[1]), let claims = try? JSONDecoder().decode(Claims.self, from: claimsData),
            !claims.sub.isEmpty
        else { throw .malformed }
        guard claims.exp > now else { throw .expired }
        return claims.sub
    }

    private static func encode(_ value: some Encodable) -> String {
        base64URL((try? JSONEncoder().encode(value)) ?? Data())
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// Base64url without padding (RFC 4648 §5), as JWTs write it. Written out here because every
    /// authenticated request decodes one and Foundation's string replacements bridge through
    /// NSString; swift-crypto has no codec for it.
    static func base64URL(_ data: Data) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((data.count * 4 + 2) / 3)
        var index = data.startIndex
        while index < data.endIndex {
            let remaining = data.endIndex - index
            let b0 = UInt32(data[index])
            let b1 = remaining > 1 ? UInt32(data[index + 1]) : 0
            let b2 = remaining > 2 ? UInt32(data[index + 2]) : 0
            let group = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(group >> 18 & 63)])
            out.append(alphabet[Int(group >> 12 & 63)])
            if remaining > 1 { out.append(alphabet[Int(group >> 6 & 63)]) }
            if remaining > 2 { out.append(alphabet[Int(group & 63)]) }
            index += min(3, remaining)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes unpadded base64url; nil for any other character, padding, or an impossible length.
    static func data(base64URL text: some StringProtocol) -> Data? {
        let bytes = Array(text.utf8)
        guard bytes.count % 4 != 1 else { return nil }
        var out = Data(capacity: bytes.count * 3 / 4)
        var group: UInt32 = 0
        var count = 0
        for byte in bytes {
            let value = values[Int(byte)]
            guard value != 0xFF else { return nil }
            group = group << 6 | UInt32(value)
            count += 1
            if count == 4 {
                out.append(UInt8(group >> 16 & 0xFF))
                out.append(UInt8(group >> 8 & 0xFF))
                out.append(UInt8(group & 0xFF))
                group = 0
                count = 0
            }
        }
        // Bits past the last byte must be zero, so that one value has one spelling.
        switch count {
        case 2:
            guard group & 0xF == 0 else { return nil }
            out.append(UInt8(group >> 4 & 0xFF))
        case 3:
            guard group & 0x3 == 0 else { return nil }
            out.append(UInt8(group >> 10 & 0xFF))
            out.append(UInt8(group >> 2 & 0xFF))
        default: break
        }
        return out
    }
}
