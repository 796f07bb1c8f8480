public import Crypto
public import Foundation
import PushFleetCore

/// How a Web Push payload is encrypted: `aes128gcm` (RFC 8291 on RFC 8188), or the older
/// `aesgcm` (draft-ietf-webpush-encryption-04) that libraries still send, whose salt and key
/// travel in the `Encryption` and `Crypto-Key` headers.
public enum WebPushContentEncoding: String, Sendable, CaseIterable, Codable {
    case aes128gcm
    case aesgcm
}

/// An encrypted payload as an application server sends it.
public struct WebPushCiphertext: Sendable, Equatable {
    public var encoding: WebPushContentEncoding
    public var body: Data
    /// `aesgcm` only: the `Encryption` (salt) and `Crypto-Key` (sender key) header values.
    public var encryption: String?
    public var cryptoKey: String?
}

/// Web Push message encryption for both ends: the application server encrypts for a
/// subscription's keys, the browser decrypts with its own. Built on swift-crypto's P-256, HKDF
/// and AES-GCM; the record layouts are written out here (no maintained Swift library has them).
public enum WebPushEncryption {
    /// RFC 8291's record size, which every library sends; a larger payload gets a larger record.
    static let recordSize = 4096

    /// Encrypts `plaintext` for `recipient`. `senderKey` and `salt` are fresh for every message
    /// unless given (test vectors); `padding` adds that many zero bytes before encryption.
    public static func encrypt(
        _ plaintext: Data, for recipient: WebPushRecipient, encoding: WebPushContentEncoding = .aes128gcm,
        senderKey: P256.KeyAgreement.PrivateKey = .init(), salt: Data? = nil, padding: Int = 0
    ) throws(WebPushCryptoError) -> WebPushCiphertext {
        let salt = salt ?? Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        guard salt.count == 16 else { throw .malformed("salt is \(salt.count) bytes, not 16") }
        guard (0...65_535).contains(padding) else { throw .malformed("padding of \(padding) bytes") }
        let secret = try agree(senderKey, with: recipient.publicKey)
        let senderPublic = senderKey.publicKey.x963Representation
        switch encoding {
        case .aes128gcm:
            let keys = modernKeys(secret: secret, auth: recipient.authSecret, receiver: recipient.publicKey, sender: senderPublic, salt: salt)
            var record = plaintext
            record.append(2)
            record.append(contentsOf: repeatElement(0, count: padding))
            let sealed = try seal(record, keys, sequence: 0)
            var body = salt
            body.appendBigEndian(UInt32(max(recordSize, sealed.count)))
            body.append(UInt8(senderPublic.count))
            body.append(senderPublic)
            body.append(sealed)
            return WebPushCiphertext(encoding: .aes128gcm, body: body)
        case .aesgcm:
            let keys = legacyKeys(secret: secret, auth: recipient.authSecret, receiver: recipient.publicKey, sender: senderPublic, salt: salt)
            let (body, rs) = try legacySeal(plaintext, keys, padding: padding)
            return WebPushCiphertext(
                encoding: .aesgcm, body: body, encryption: "salt=\(Base64URL.encode(salt))" + (rs.map { ";rs=\($0)" } ?? ""),
                cryptoKey: "dh=\(Base64URL.encode(senderPublic))"
            )
        }
    }

    /// Decrypts a push as the browser holding `keys` does. `encryption` and `cryptoKey` are the
    /// headers' values, needed for `aesgcm` only.
    public static func decrypt(
        _ body: Data, encoding: WebPushContentEncoding, encryption: String? = nil, cryptoKey: String? = nil, keys: WebPushKeys
    ) throws(WebPushCryptoError) -> Data {
        switch encoding {
        case .aes128gcm: try decryptModern(body, keys: keys)
        case .aesgcm: try decryptLegacy(body, encryption: encryption, cryptoKey: cryptoKey, keys: keys)
        }
    }

    // MARK: aes128gcm

    /// RFC 8188 §2.1: salt (16) · rs (4) · idlen (1) · keyid (the sender's public key, RFC 8291
    /// §4), then records of `rs` bytes, the last one shorter or equal.
    private static func decryptModern(_ body: Data, keys: WebPushKeys) throws(WebPushCryptoError) -> Data {
        let body = Data(body)
        guard body.count >= 21 else { throw .malformed("body of \(body.count) bytes has no aes128gcm header") }
        let salt = body.subdata(in: 0..<16)
        let rs = body[16..<20].reduce(0) { $0 << 8 | Int($1) }
        let idLength = Int(body[20])
        guard idLength == 65 else { throw .malformed("key id of \(idLength) bytes, not a P-256 public key") }
        guard rs >= 18 else { throw .malformed("record size \(rs)") }
        guard body.count > 21 + idLength else { throw .malformed("no records") }
        let senderPublic = body.subdata(in: 21..<(21 + idLength))
        let secret = try agree(keys.privateKey, with: senderPublic)
        let derived = modernKeys(secret: secret, auth: keys.authSecret, receiver: keys.publicKey, sender: senderPublic, salt: salt)
        var plaintext = Data()
        var offset = 21 + idLength
        var sequence: UInt64 = 0
        while offset < body.count {
            let end = min(offset + rs, body.count)
            let last = end == body.count
            guard end - offset > 16 else { throw .malformed("a record of \(end - offset) bytes") }
            let record = try open(body.subdata(in: offset..<end), derived, sequence: sequence)
            // The delimiter is the last non-zero byte: 2 ends the message, 1 a record before it.
            guard let delimiter = record.lastIndex(where: { $0 != 0 }) else { throw .malformed("a record without its delimiter") }
            guard record[delimiter] == (last ? 2 : 1) else { throw .malformed("record \(sequence) has delimiter \(record[delimiter])") }
            plaintext.append(record[record.startIndex..<delimiter])
            offset = end
            sequence += 1
        }
        return plaintext
    }

    static func modernKeys(secret: Data, auth: Data, receiver: Data, sender: Data, salt: Data) -> (key: SymmetricKey, nonce: Data) {
        var keyInfo = Data("WebPush: info".utf8)
        keyInfo.append(0)
        keyInfo.append(receiver)
        keyInfo.append(sender)
        let ikm = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: secret), salt: auth, info: keyInfo, outputByteCount: 32)
        let key = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Data("Content-Encoding: aes128gcm\0".utf8), outputByteCount: 16)
        let nonce = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Data("Content-Encoding: nonce\0".utf8), outputByteCount: 12)
        return (key, nonce.withUnsafeBytes { Data($0) })
    }

    // MARK: Shared

    static func agree(_ key: P256.KeyAgreement.PrivateKey, with publicKey: Data) throws(WebPushCryptoError) -> Data {
        guard let other = try? P256.KeyAgreement.PublicKey(x963Representation: publicKey) else {
            throw .malformed("the other side's key is not a P-256 point")
        }
        guard let shared = try? key.sharedSecretFromKeyAgreement(with: other) else { throw .undecryptable("no shared secret") }
        return shared.withUnsafeBytes { Data($0) }
    }

    /// The record's nonce: the derived nonce with the record's number XORed into its low bits.
    static func nonce(_ base: Data, sequence: UInt64) -> AES.GCM.Nonce {
        var bytes = [UInt8](base)
        for index in 0..<8 { bytes[11 - index] ^= UInt8(truncatingIfNeeded: sequence >> (8 * UInt64(index))) }
        return try! AES.GCM.Nonce(data: bytes)  // 12 bytes by construction
    }

    static func seal(_ record: Data, _ keys: (key: SymmetricKey, nonce: Data), sequence: UInt64) throws(WebPushCryptoError) -> Data {
        guard let box = try? AES.GCM.seal(record, using: keys.key, nonce: nonce(keys.nonce, sequence: sequence)) else {
            throw .malformed("AES-GCM refused the record")
        }
        var out = Data(box.ciphertext)
        out.append(box.tag)
        return out
    }

    static func open(_ sealed: Data, _ keys: (key: SymmetricKey, nonce: Data), sequence: UInt64) throws(WebPushCryptoError) -> Data {
        guard sealed.count >= 16,
            let box = try? AES.GCM.SealedBox(nonce: nonce(keys.nonce, sequence: sequence), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16)),
            let record = try? AES.GCM.open(box, using: keys.key)
        else {
            throw .undecryptable("record \(sequence) does not authenticate with these keys")
        }
        return record
    }
}

extension Data {
    mutating func appendBigEndian(_ value: UInt32) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }

    mutating func appendBigEndian(_ value: UInt16) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}
