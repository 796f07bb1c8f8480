public import Crypto
public import Foundation
import PushFleetCore

/// A browser's subscription keys (W3C Push API): its P-256 key pair, whose public half is the
/// subscription's `p256dh`, and a 16-byte authentication secret, its `auth`.
public struct WebPushKeys: Sendable {
    public let privateKey: P256.KeyAgreement.PrivateKey
    public let authSecret: Data

    public init(privateKey: P256.KeyAgreement.PrivateKey, authSecret: Data) {
        self.privateKey = privateKey
        self.authSecret = authSecret
    }

    /// A fresh pair and secret, as a browser makes for each subscription.
    public static func generate() -> WebPushKeys {
        var secret = SystemRandomNumberGenerator()
        let auth = Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &secret) })
        return WebPushKeys(privateKey: P256.KeyAgreement.PrivateKey(), authSecret: auth)
    }

    /// The public key, uncompressed (65 bytes), as `p256dh` carries it.
    public var publicKey: Data { privateKey.publicKey.x963Representation }

    /// `keys.p256dh` and `keys.auth` of the subscription's JSON (base64url, no padding).
    public var p256dh: String { Base64URL.encode(publicKey) }
    public var auth: String { Base64URL.encode(authSecret) }
}

/// The receiving side's keys as an application server holds them: decoded from the
/// subscription's base64url text and checked once, where they enter.
public struct WebPushRecipient: Sendable, Equatable {
    /// Uncompressed P-256 point (65 bytes).
    public let publicKey: Data
    public let authSecret: Data

    public init(publicKey: Data, authSecret: Data) throws(WebPushCryptoError) {
        guard publicKey.count == 65, publicKey.first == 0x04, (try? P256.KeyAgreement.PublicKey(x963Representation: publicKey)) != nil else {
            throw .malformed("p256dh is not an uncompressed P-256 point")
        }
        guard authSecret.count == 16 else { throw .malformed("auth is \(authSecret.count) bytes, not 16") }
        self.publicKey = publicKey
        self.authSecret = authSecret
    }

    /// From `keys.p256dh` and `keys.auth`; padded base64url, as some libraries write it, is taken.
    public init(p256dh: String, auth: String) throws(WebPushCryptoError) {
        guard let key = WebPushText.decode(p256dh) else { throw .malformed("p256dh is not base64url") }
        guard let secret = WebPushText.decode(auth) else { throw .malformed("auth is not base64url") }
        try self.init(publicKey: key, authSecret: secret)
    }
}

public enum WebPushCryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Input that is not what the format says (a header, a key, a length).
    case malformed(String)
    /// Well-formed, but it does not decrypt with these keys (wrong keys, altered bytes).
    case undecryptable(String)

    public var description: String {
        switch self {
        case .malformed(let why): "malformed: \(why)"
        case .undecryptable(let why): "undecryptable: \(why)"
        }
    }
}

/// Base64url as Web Push's keys and headers arrive from other software: padding and the standard
/// alphabet's `+` and `/` are tolerated, whitespace is not.
enum WebPushText {
    static func decode(_ text: some StringProtocol) -> Data? {
        var text = String(text)
        while text.hasSuffix("=") { text.removeLast() }
        if text.contains(where: { $0 == "+" || $0 == "/" }) {
            text = String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
        }
        return Base64URL.decode(text)
    }
}
