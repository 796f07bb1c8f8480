import Crypto
import Foundation
import PushFleetEngine
import PushFleetWebPush

/// What Web Push's cryptography costs per push, on this process's CPU (getrusage): the
/// application server's encryption and VAPID signature, the push service's VAPID check, the
/// browser's decryption. Each is the median of three rounds of `count` pushes.
enum WebPushCryptoCost {
    struct Row {
        var name: String
        var microseconds: Double
    }

    static func measure(count: Int = 2_000) throws -> [Row] {
        let browser = WebPushKeys.generate()
        let recipient = try WebPushRecipient(p256dh: browser.p256dh, auth: browser.auth)
        let vapid = P256.Signing.PrivateKey()
        let endpoint = URL(string: "https://fcm.googleapis.com/fcm/send/bench")!
        // A secure push's payload as a backend sends it: the nonce and ids, a few hundred bytes.
        let payload = Data(#"{"kind":"secure","id":"n-0123456789abcdef","from":"user-42","nonce":"pf:run:000001:0000000001:c0ffee","sent_at":1764158400000}"#.utf8)
        var rows: [Row] = []
        for encoding in WebPushContentEncoding.allCases {
            let sealed = try WebPushEncryption.encrypt(payload, for: recipient, encoding: encoding)
            rows.append(Row(name: "encrypt (\(encoding.rawValue))", microseconds: try median(count) { _ = try WebPushEncryption.encrypt(payload, for: recipient, encoding: encoding) }))
            rows.append(
                Row(name: "decrypt (\(encoding.rawValue))", microseconds: try median(count) {
                    _ = try WebPushEncryption.decrypt(sealed.body, encoding: encoding, encryption: sealed.encryption, cryptoKey: sealed.cryptoKey, keys: browser)
                })
            )
        }
        let expiry = Int64(Date().timeIntervalSince1970) + 3600
        rows.append(Row(name: "VAPID sign", microseconds: try median(count) { _ = try VAPID.authorization(for: endpoint, key: vapid, subject: "mailto:ops@example.com", expiresAt: expiry) }))
        let header = try VAPID.authorization(for: endpoint, key: vapid, subject: "mailto:ops@example.com", expiresAt: expiry)
        let now = expiry - 60
        rows.append(Row(name: "VAPID verify", microseconds: try median(count) { _ = VAPID.verify(authorization: header, cryptoKey: nil, origin: "https://fcm.googleapis.com", now: now) }))
        // The push service's path: a header seen before is not checked for its signature again.
        let verifier = VAPIDVerifier()
        rows.append(
            Row(name: "VAPID verify, header seen before", microseconds: try median(count) {
                _ = verifier.verify(authorization: header, cryptoKey: nil, origin: "https://fcm.googleapis.com", now: now)
            })
        )
        return rows
    }

    private static func median(_ count: Int, _ body: () throws -> Void) throws -> Double {
        var rounds: [Double] = []
        for _ in 0..<3 {
            let start = CPUTime.own()
            for _ in 0..<count { try body() }
            rounds.append((CPUTime.own() - start) / Double(count) * 1e6)
        }
        return rounds.sorted()[1]
    }
}
