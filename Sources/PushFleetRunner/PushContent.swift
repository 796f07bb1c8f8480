import Foundation
import PushFleetWire

/// What a received push says, in every platform's format, as the seed's app reads it.
enum PushContent: Equatable, Sendable {
    /// An alert; the nonce of the send it names, if any.
    case plain(nonce: Int?)
    /// A secure push: only the id of the stored notification.
    case secure(id: String)
    /// A rich push: the stored content's id and the message (which carries the nonce).
    case rich(id: String, nonce: Int?)
    case unrecognised

    /// The marker every message and payload of a run carries: `pf:<send id>`.
    static func nonceText(_ send: Int) -> String { "pf:\(send)" }

    /// The nonce in a text, from its last `pf:` marker.
    static func nonce(in text: String) -> Int? {
        guard let range = text.range(of: "pf:", options: .backwards) else { return nil }
        let digits = text[range.upperBound...].prefix { $0.isNumber }
        return Int(digits)
    }

    /// The secure payload of a send: nonce and recipient, so a fetch proves whose it was.
    static func securePayload(send: Int, recipient: String) -> String { "pf:\(send):\(recipient)" }

    /// Parses a secure payload into its nonce and recipient.
    static func parseSecurePayload(_ text: String) -> (nonce: Int, recipient: String)? {
        let parts = text.split(separator: ":", maxSplits: 2)
        guard parts.count == 3, parts[0] == "pf", let nonce = Int(parts[1]) else { return nil }
        return (nonce, String(parts[2]))
    }

    init(frame: PushFrame) {
        let body = frame.body
        switch frame.platform {
        case .wns, .mpns:
            if frame.pushType == "wns/raw" {
                if let object = Self.object(body), let id = object["richId"] as? String {
                    self = .rich(id: id, nonce: (object["richMessage"] as? String).flatMap(Self.nonce(in:)))
                } else {
                    self = body.isEmpty ? .unrecognised : .secure(id: body)
                }
            } else {
                self = .plain(nonce: Self.nonce(in: Self.toastText(body) ?? ""))
            }
        case .apns:
            self = Self.fromFields(Self.object(body) ?? [:], alert: ((Self.object(body)?["aps"] as? [String: Any])?["alert"]) as? String)
        case .fcm:
            let message = Self.object(body)?["message"] as? [String: Any]
            let data = message?["data"] as? [String: Any] ?? [:]
            self = Self.fromFields(data, alert: data["message"] as? String)
        }
    }

    private static func fromFields(_ fields: [String: Any], alert: String?) -> PushContent {
        if let id = fields["secureId"] as? String { return .secure(id: id) }
        if let id = fields["richId"] as? String {
            return .rich(id: id, nonce: (fields["richMessage"] as? String).flatMap(nonce(in:)))
        }
        if let alert { return .plain(nonce: nonce(in: alert)) }
        return .unrecognised
    }

    private static func object(_ text: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }

    /// The text of a WNS toast's first `<text>` element, unescaped.
    static func toastText(_ xml: String) -> String? {
        guard let open = xml.range(of: "<text"), let close = xml.range(of: ">", range: open.upperBound..<xml.endIndex),
            let end = xml.range(of: "</text>", range: close.upperBound..<xml.endIndex)
        else { return nil }
        return String(xml[close.upperBound..<end.lowerBound])
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}
