import Crypto
import Foundation

/// `aesgcm` (draft-ietf-webpush-encryption-04 on draft-ietf-httpbis-encryption-encoding-03):
/// the salt is in `Encryption: salt=…[; rs=…]`, the sender's key in `Crypto-Key: dh=…`; each
/// record is a two-byte padding length, that many zero bytes and data, sealed to `rs` + 16 bytes,
/// and a message that ends on a record boundary gets one more record of padding only.
extension WebPushEncryption {
    static func decryptLegacy(_ body: Data, encryption: String?, cryptoKey: String?, keys: WebPushKeys) throws(WebPushCryptoError) -> Data {
        guard let encryption else { throw .malformed("aesgcm without an Encryption header") }
        guard let cryptoKey else { throw .malformed("aesgcm without a Crypto-Key header") }
        let salted = HeaderParameters.entries(encryption).first { $0["salt"] != nil }
        guard let salted, let saltText = salted["salt"], let salt = WebPushText.decode(saltText), salt.count == 16 else {
            throw .malformed("Encryption has no 16-byte salt")
        }
        let rs: Int
        if let text = salted["rs"] {
            guard let value = Int(text), (2...Int(UInt32.max)).contains(value) else { throw .malformed("rs=\(text)") }
            rs = value
        } else {
            rs = recordSize
        }
        // The key with the salt's keyid, else the first dh= there is.
        let entries = HeaderParameters.entries(cryptoKey).filter { $0["dh"] != nil }
        let entry = salted["keyid"].flatMap { id in entries.first { $0["keyid"] == id } } ?? entries.first
        guard let dhText = entry?["dh"], let senderPublic = WebPushText.decode(dhText) else { throw .malformed("Crypto-Key has no dh key") }
        let secret = try agree(keys.privateKey, with: senderPublic)
        let derived = legacyKeys(secret: secret, auth: keys.authSecret, receiver: keys.publicKey, sender: senderPublic, salt: salt)
        let body = Data(body)
        guard !body.isEmpty else { throw .malformed("no records") }
        var plaintext = Data()
        var offset = 0
        var sequence: UInt64 = 0
        while offset < body.count {
            let end = min(offset + rs + 16, body.count)
            if end == body.count, end - offset == rs + 16 { throw .malformed("the message ends on a full record (truncated)") }
            let record = try open(body.subdata(in: offset..<end), derived, sequence: sequence)
            guard record.count >= 2 else { throw .malformed("record \(sequence) is shorter than its padding length") }
            let padding = Int(record[record.startIndex]) << 8 | Int(record[record.startIndex + 1])
            let data = record.startIndex + 2 + padding
            guard data <= record.endIndex, record[(record.startIndex + 2)..<data].allSatisfy({ $0 == 0 }) else {
                throw .malformed("record \(sequence) has bad padding")
            }
            plaintext.append(record[data...])
            offset = end
            sequence += 1
        }
        return plaintext
    }

    /// The records, and their size when it is not the default 4,096 (a padding that large).
    static func legacySeal(_ plaintext: Data, _ keys: (key: SymmetricKey, nonce: Data), padding: Int) throws(WebPushCryptoError) -> (body: Data, rs: Int?) {
        let rs = max(recordSize, min(padding, 65_535) + 2 + 1)
        var body = Data()
        var offset = plaintext.startIndex
        var pad = padding
        var sequence: UInt64 = 0
        while true {
            let room = rs - 2 - pad
            let end = min(offset + room, plaintext.endIndex)
            var record = Data()
            record.appendBigEndian(UInt16(pad))
            record.append(contentsOf: repeatElement(0, count: pad))
            record.append(plaintext[offset..<end])
            body.append(try seal(record, keys, sequence: sequence))
            sequence += 1
            offset = end
            pad = 0
            // A final record shorter than rs says the message is whole.
            if record.count < rs { return (body, rs == recordSize ? nil : rs) }
        }
    }

    static func legacyKeys(secret: Data, auth: Data, receiver: Data, sender: Data, salt: Data) -> (key: SymmetricKey, nonce: Data) {
        let ikm = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: secret), salt: auth, info: Data("Content-Encoding: auth\0".utf8), outputByteCount: 32)
        var context = Data("P-256\0".utf8)
        context.appendBigEndian(UInt16(receiver.count))
        context.append(receiver)
        context.appendBigEndian(UInt16(sender.count))
        context.append(sender)
        let key = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Data("Content-Encoding: aesgcm\0".utf8) + context, outputByteCount: 16)
        let nonce = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Data("Content-Encoding: nonce\0".utf8) + context, outputByteCount: 12)
        return (key, nonce.withUnsafeBytes { Data($0) })
    }
}

/// Parameters of `Encryption` and `Crypto-Key`: entries separated by commas, each `name=value`
/// pairs separated by semicolons; a value may be quoted.
enum HeaderParameters {
    static func entries(_ header: String) -> [[String: String]] {
        header.split(separator: ",").map { entry in
            var parameters: [String: String] = [:]
            for pair in entry.split(separator: ";") {
                guard let equals = pair.firstIndex(of: "=") else { continue }
                let name = pair[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
                var value = pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces)
                if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
                if parameters[name] == nil { parameters[name] = value }
            }
            return parameters
        }
    }
}
