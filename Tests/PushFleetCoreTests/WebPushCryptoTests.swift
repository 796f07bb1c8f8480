import Crypto
import Foundation
import PushFleetCore
@testable import PushFleetWebPush
import Testing

/// Web Push encryption and VAPID against the RFCs' own examples, and both ends against each other.
@Suite("Web Push cryptography")
struct WebPushCryptoTests {
    static func b64(_ text: String) -> Data { Base64URL.decode(text)! }

    /// RFC 8291 Appendix A.
    enum RFC8291 {
        static let plaintext = Data("When I grow up, I want to be a watermelon".utf8)
        static let asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
        static let asPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
        static let uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
        static let uaPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
        static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
        static let auth = "BTBZMqHH6r4Tts7J_aSIgg"
        static let body =
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

        static var keys: WebPushKeys {
            WebPushKeys(privateKey: try! P256.KeyAgreement.PrivateKey(rawRepresentation: b64(uaPrivate)), authSecret: b64(auth))
        }
    }

    /// draft-ietf-webpush-encryption-04's `aesgcm` example.
    enum Draft04 {
        static let uaPrivate = "9FWl15_QUQAWDaD3k3l50ZBZQJ4au27F1V4F0uLSD_M"
        static let uaPublic = "BCEkBjzL8Z3C-oi2Q7oE5t2Np-p7osjGLg93qUP0wvqRT21EEWyf0cQDQcakQMqz4hQKYOQ3il2nNZct4HgAUQU"
        static let auth = "R29vIGdvbyBnJyBqb29iIQ"
        static let body = "6nqAQUME8hNqw5J3kl8cpVVJylXKYqZOeseZG8UueKpA"
        static let cryptoKey = #"keyid="dhkey"; dh="BNoRDbb84JGm8g5Z5CFxurSqsXWJ11ItfXEWYVLE85Y7CYkDjXsIEc4aqxYaQ1G8BqkXCJ6DPpDrWtdWj_mugHU""#
        static let encryption = #"keyid="dhkey"; salt="lngarbyKfMoi9Z75xYXmkg""#

        static var keys: WebPushKeys {
            WebPushKeys(privateKey: try! P256.KeyAgreement.PrivateKey(rawRepresentation: b64(uaPrivate)), authSecret: b64(auth))
        }
    }

    @Test("RFC 8291's example: encrypting with its key and salt gives its body, and the body decrypts to its text")
    func rfc8291() throws {
        #expect(RFC8291.keys.p256dh == RFC8291.uaPublic)
        let sender = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.b64(RFC8291.asPrivate))
        #expect(Base64URL.encode(sender.publicKey.x963Representation) == RFC8291.asPublic)
        let recipient = try WebPushRecipient(p256dh: RFC8291.uaPublic, auth: RFC8291.auth)
        let sealed = try WebPushEncryption.encrypt(RFC8291.plaintext, for: recipient, senderKey: sender, salt: Self.b64(RFC8291.salt))
        #expect(Base64URL.encode(sealed.body) == RFC8291.body)
        #expect(try WebPushEncryption.decrypt(Self.b64(RFC8291.body), encoding: .aes128gcm, keys: RFC8291.keys) == RFC8291.plaintext)
    }

    @Test("the aesgcm example of draft-ietf-webpush-encryption-04 decrypts, quoted header values and key ids included")
    func draft04() throws {
        #expect(Draft04.keys.p256dh == Draft04.uaPublic)
        let plaintext = try WebPushEncryption.decrypt(
            Self.b64(Draft04.body), encoding: .aesgcm, encryption: Draft04.encryption, cryptoKey: Draft04.cryptoKey, keys: Draft04.keys
        )
        #expect(String(decoding: plaintext, as: UTF8.self) == "I am the walrus")
    }

    @Test("both encodings round-trip, from empty to several records, with padding", arguments: WebPushContentEncoding.allCases)
    func roundTrip(encoding: WebPushContentEncoding) throws {
        let keys = WebPushKeys.generate()
        let recipient = try WebPushRecipient(p256dh: keys.p256dh, auth: keys.auth)
        for (size, padding) in [(0, 0), (1, 0), (3_993, 0), (4_094, 0), (4_095, 0), (10_000, 0), (100, 4_093), (100, 5_000)] {
            let plaintext = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
            let sealed = try WebPushEncryption.encrypt(plaintext, for: recipient, encoding: encoding, padding: padding)
            let opened = try WebPushEncryption.decrypt(sealed.body, encoding: encoding, encryption: sealed.encryption, cryptoKey: sealed.cryptoKey, keys: keys)
            #expect(opened == plaintext, "\(encoding), \(size) bytes, padding \(padding)")
        }
        let small = try WebPushEncryption.encrypt(Data("x".utf8), for: recipient, encoding: encoding)
        #expect(small.body.count == (encoding == .aes128gcm ? 86 + 1 + 1 + 16 : 2 + 1 + 16), "one record, no padding")
    }

    @Test("an altered byte, another browser's keys or another auth secret do not decrypt", arguments: WebPushContentEncoding.allCases)
    func tampering(encoding: WebPushContentEncoding) throws {
        let keys = WebPushKeys.generate()
        let recipient = try WebPushRecipient(p256dh: keys.p256dh, auth: keys.auth)
        let sealed = try WebPushEncryption.encrypt(Data("secret".utf8), for: recipient, encoding: encoding)
        var altered = sealed.body
        altered[altered.count - 1] ^= 1
        let others = [
            WebPushKeys.generate(),
            WebPushKeys(privateKey: keys.privateKey, authSecret: Data(repeating: 9, count: 16)),
        ]
        #expect(throws: WebPushCryptoError.self) {
            try WebPushEncryption.decrypt(altered, encoding: encoding, encryption: sealed.encryption, cryptoKey: sealed.cryptoKey, keys: keys)
        }
        for other in others {
            #expect(throws: WebPushCryptoError.self) {
                try WebPushEncryption.decrypt(sealed.body, encoding: encoding, encryption: sealed.encryption, cryptoKey: sealed.cryptoKey, keys: other)
            }
        }
    }

    @Test("aes128gcm in several records (RFC 8188) decrypts; a wrong delimiter, a short record or a bad header is refused")
    func records() throws {
        let keys = WebPushKeys.generate()
        let sender = P256.KeyAgreement.PrivateKey()
        let salt = Data(repeating: 3, count: 16)
        let secret = try WebPushEncryption.agree(sender, with: keys.publicKey)
        let derived = WebPushEncryption.modernKeys(
            secret: secret, auth: keys.authSecret, receiver: keys.publicKey, sender: sender.publicKey.x963Representation, salt: salt
        )
        func body(rs: UInt32, records: [Data], idLength: UInt8 = 65) throws -> Data {
            var body = salt
            body.appendBigEndian(rs)
            body.append(idLength)
            body.append(sender.publicKey.x963Representation)
            for (index, record) in records.enumerated() { body.append(try WebPushEncryption.seal(record, derived, sequence: UInt64(index))) }
            return body
        }
        // rs 20: each record holds 4 bytes (3 of data and its delimiter) and a 16-byte tag.
        let good = try body(rs: 20, records: [Data("abc\u{1}".utf8), Data("def\u{1}".utf8), Data("g\u{2}\0".utf8)])
        #expect(try WebPushEncryption.decrypt(good, encoding: .aes128gcm, keys: keys) == Data("abcdefg".utf8))
        let cases: [(String, Data)] = [
            ("final record ends with 1", try body(rs: 20, records: [Data("abc\u{1}".utf8), Data("d\u{1}".utf8)])),
            ("earlier record ends with 2", try body(rs: 20, records: [Data("abc\u{2}".utf8), Data("d\u{2}".utf8)])),
            ("record of zeros", try body(rs: 20, records: [Data([0, 0, 0])])),
            ("record size under 18", try body(rs: 17, records: [Data("a\u{2}".utf8)])),
            ("key id of 64 bytes", try body(rs: 4096, records: [Data("a\u{2}".utf8)], idLength: 64)),
            ("header only", try body(rs: 4096, records: [])),
            ("short", Data(repeating: 0, count: 20)),
        ]
        for (name, bad) in cases {
            #expect(throws: WebPushCryptoError.self, "\(name)") { try WebPushEncryption.decrypt(bad, encoding: .aes128gcm, keys: keys) }
        }
    }

    @Test("aesgcm without its headers, with a bad salt or rs, or cut on a record boundary is refused")
    func legacyHeaders() throws {
        let keys = WebPushKeys.generate()
        let recipient = try WebPushRecipient(p256dh: keys.p256dh, auth: keys.auth)
        let sealed = try WebPushEncryption.encrypt(Data(repeating: 1, count: 5_000), for: recipient, encoding: .aesgcm)
        let attempts: [(String, Data, String?, String?)] = [
            ("no Encryption", sealed.body, nil, sealed.cryptoKey),
            ("no Crypto-Key", sealed.body, sealed.encryption, nil),
            ("short salt", sealed.body, "salt=AAAA", sealed.cryptoKey),
            ("rs=1", sealed.body, sealed.encryption! + ";rs=1", sealed.cryptoKey),
            ("rs=x", sealed.body, sealed.encryption! + ";rs=x", sealed.cryptoKey),
            ("no dh", sealed.body, sealed.encryption, "p256ecdsa=AAAA"),
            ("first record only", sealed.body.prefix(4096 + 16), sealed.encryption, sealed.cryptoKey),
        ]
        for (name, body, encryption, cryptoKey) in attempts {
            #expect(throws: WebPushCryptoError.self, "\(name)") {
                try WebPushEncryption.decrypt(body, encoding: .aesgcm, encryption: encryption, cryptoKey: cryptoKey, keys: keys)
            }
        }
    }

    @Test("subscription keys are checked where they enter: padded base64 is taken, a point off the curve or a short secret is not")
    func recipients() throws {
        let keys = WebPushKeys.generate()
        let padded = Data(keys.publicKey).base64EncodedString()
        #expect(try WebPushRecipient(p256dh: padded, auth: keys.authSecret.base64EncodedString()).publicKey == keys.publicKey)
        var offCurve = keys.publicKey
        offCurve[64] ^= 1
        #expect(throws: WebPushCryptoError.self) { try WebPushRecipient(publicKey: offCurve, authSecret: keys.authSecret) }
        #expect(throws: WebPushCryptoError.self) { try WebPushRecipient(publicKey: keys.publicKey, authSecret: Data(count: 8)) }
        #expect(throws: WebPushCryptoError.self) { try WebPushRecipient(p256dh: "not base64!", auth: keys.auth) }
    }
}

@Suite("VAPID")
struct VAPIDTests {
    /// RFC 8292 §2.4.
    static let token =
        "eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9.eyJhdWQiOiJodHRwczovL3B1c2guZXhhbXBsZS5uZXQiLCJleHAiOjE0NTM1MjM3NjgsInN1YiI6Im1haWx0bzpwdXNoQGV4YW1wbGUuY29tIn0.i3CYb7t4xfxCDquptFOepC9GAu_HLGkMlMuCGSK2rpiUfnK9ojFwDXb1JrErtmysazNjjvW2L9OkSSHzvoD1oA"
    static let key = "BA1Hxzyi1RUM1b5wjxsn7nGxAszw2u61m164i3MrAIxHF6YK5h4SDYic-dRuU_RCPCfA5aq9ojSwk5Y2EmClBPs"
    static let expiry: Int64 = 1_453_523_768

    @Test("RFC 8292's example validates for its origin an hour before it expires, in both header forms")
    func rfcExample() throws {
        let credential = try VAPID.verify(authorization: "vapid t=\(Self.token), k=\(Self.key)", cryptoKey: nil, origin: "https://push.example.net", now: Self.expiry - 3600).get()
        #expect(credential.claims == VAPID.Claims(aud: "https://push.example.net", exp: Self.expiry, sub: "mailto:push@example.com"))
        #expect(Base64URL.encode(credential.publicKey) == Self.key)
        let draft = VAPID.verify(authorization: "WebPush \(Self.token)", cryptoKey: "dh=abc;p256ecdsa=\(Self.key)", origin: "https://push.example.net", now: Self.expiry - 3600)
        #expect((try? draft.get()) == credential)
    }

    @Test("the example is refused for another origin, once expired, with a changed claim or another key")
    func refusals() throws {
        let header = "vapid t=\(Self.token), k=\(Self.key)"
        let now = Self.expiry - 3600
        #expect(VAPID.verify(authorization: header, cryptoKey: nil, origin: "https://push.example.org", now: now) == .failure(.wrongAudience("https://push.example.net")))
        #expect(VAPID.verify(authorization: header, cryptoKey: nil, origin: "https://push.example.net", now: Self.expiry) == .failure(.badExpiry("has passed")))
        #expect(VAPID.verify(authorization: header, cryptoKey: nil, origin: "https://push.example.net", now: Self.expiry - 90_000) == .failure(.badExpiry("is more than 24 hours ahead")))
        let parts = Self.token.split(separator: ".")
        let forged = Base64URL.encode(Data(#"{"aud":"https://push.example.net","exp":1453523769,"sub":"mailto:push@example.com"}"#.utf8))
        let forgedHeader = "vapid t=\(parts[0]).\(forged).\(parts[2]), k=\(Self.key)"
        #expect(VAPID.verify(authorization: forgedHeader, cryptoKey: nil, origin: "https://push.example.net", now: now) == .failure(.badSignature))
        let otherKey = Base64URL.encode(P256.Signing.PrivateKey().publicKey.x963Representation)
        #expect(VAPID.verify(authorization: "vapid t=\(Self.token), k=\(otherKey)", cryptoKey: nil, origin: "https://push.example.net", now: now) == .failure(.badSignature))
        for malformed in ["vapid t=\(Self.token)", "vapid k=\(Self.key)", "Bearer \(Self.token)", "vapid t=a.b, k=\(Self.key)", "vapid t=\(Self.token), k=AAAA", "WebPush \(Self.token)"] {
            guard case .failure(.malformed) = VAPID.verify(authorization: malformed, cryptoKey: nil, origin: "https://push.example.net", now: now) else {
                Issue.record("\(malformed) was not refused as malformed")
                continue
            }
        }
        #expect(VAPID.verify(authorization: nil, cryptoKey: nil, origin: "https://push.example.net", now: now) == .failure(.missing))
    }

    @Test("a token made here verifies for the endpoint's origin; without a subject it is refused")
    func signed() throws {
        let key = P256.Signing.PrivateKey()
        let endpoint = URL(string: "https://FCM.googleapis.com:443/fcm/send/abc")!
        let header = try VAPID.authorization(for: endpoint, key: key, subject: "mailto:ops@example.com", expiresAt: 2_000_000_000)
        #expect(VAPID.origin(of: endpoint) == "https://fcm.googleapis.com")
        let credential = try VAPID.verify(authorization: header, cryptoKey: nil, origin: "https://fcm.googleapis.com", now: 2_000_000_000 - 43_200).get()
        #expect(credential.publicKey == key.publicKey.x963Representation)
        let anonymous = try VAPID.authorization(for: endpoint, key: key, subject: "", expiresAt: 2_000_000_000)
        #expect(VAPID.verify(authorization: anonymous, cryptoKey: nil, origin: "https://fcm.googleapis.com", now: 2_000_000_000 - 60) == .failure(.noSubject))
        #expect(VAPID.origin(of: URL(string: "http://127.0.0.1:8080/wpush/v2/x")!) == "http://127.0.0.1:8080")
    }

    @Test("a header seen before is not checked for its signature again, but still for its audience and time; a changed one is checked afresh")
    func verifierCache() throws {
        let verifier = VAPIDVerifier(capacity: 2)
        let header = "vapid t=\(Self.token), k=\(Self.key)"
        let now = Self.expiry - 3600
        let first = try verifier.verify(authorization: header, cryptoKey: nil, origin: "https://push.example.net", now: now).get()
        #expect(try verifier.verify(authorization: header, cryptoKey: nil, origin: "https://push.example.net", now: now + 1).get() == first)
        #expect(verifier.verify(authorization: header, cryptoKey: nil, origin: "https://push.example.org", now: now) == .failure(.wrongAudience("https://push.example.net")))
        #expect(verifier.verify(authorization: header, cryptoKey: nil, origin: "https://push.example.net", now: Self.expiry) == .failure(.badExpiry("has passed")))
        let parts = Self.token.split(separator: ".")
        let forged = "vapid t=\(parts[0]).\(parts[1]).\(parts[2].dropLast(2))AA, k=\(Self.key)"
        #expect(verifier.verify(authorization: forged, cryptoKey: nil, origin: "https://push.example.net", now: now) == .failure(.badSignature))
        // The draft form's key is part of what was checked: another Crypto-Key is checked afresh.
        let draft = "WebPush \(Self.token)"
        #expect((try? verifier.verify(authorization: draft, cryptoKey: "p256ecdsa=\(Self.key)", origin: "https://push.example.net", now: now).get()) != nil)
        let otherKey = Base64URL.encode(P256.Signing.PrivateKey().publicKey.x963Representation)
        #expect(verifier.verify(authorization: draft, cryptoKey: "p256ecdsa=\(otherKey)", origin: "https://push.example.net", now: now) == .failure(.badSignature))
    }

    @Test("a signer reuses its header per audience until less than its renewal margin is left")
    func signerCache() throws {
        let signer = VAPIDSigner(subject: "mailto:ops@example.com", lifetime: 12 * 3600, renewBefore: 11 * 3600)
        let fcm = URL(string: "https://fcm.googleapis.com/fcm/send/a")!
        let start: Int64 = 2_000_000_000
        let first = try signer.authorization(for: fcm, now: start)
        #expect(try signer.authorization(for: URL(string: "https://fcm.googleapis.com/fcm/send/b")!, now: start + 3599) == first, "same audience")
        #expect(try signer.authorization(for: URL(string: "https://web.push.apple.com/x")!, now: start) != first, "another audience")
        let renewed = try signer.authorization(for: fcm, now: start + 3601)
        #expect(renewed != first)
        let credential = try VAPID.verify(authorization: renewed, cryptoKey: nil, origin: "https://fcm.googleapis.com", now: start + 3601).get()
        #expect(credential.claims.exp == start + 3601 + 12 * 3600 && credential.claims.sub == "mailto:ops@example.com")
    }
}
