import Foundation
import PushFleetCore
import PushFleetWire
import PushFleetClients
import PushFleetMetrics

/// A send's nonce as a push carries it: `pf:<run id>:<send>`.
enum Nonce: Equatable, Sendable {
    /// A send of this run.
    case this(Int)
    /// A send of another run (another run id, or the format of a build without run ids).
    case otherRun

    var attribution: DeliveryLedger.Attribution {
        switch self {
        case .this(let send): .send(send)
        case .otherRun: .otherRun
        }
    }
}

/// What a received push says, in every platform's format, as the seed's app reads it.
enum PushContent: Equatable, Sendable {
    /// An alert; the nonce of the send it names, if any.
    case plain(nonce: Nonce?)
    /// A secure push: only the id of the stored notification.
    case secure(id: String)
    /// A rich push: the stored content's id and the message (which carries the nonce).
    case rich(id: String, nonce: Nonce?)
    case unrecognised

    /// The marker every message of a run carries.
    static func nonceText(_ send: Int, run: String) -> String { "pf:\(run):\(send)" }

    /// The nonce in a text, from its last `pf:` marker.
    static func nonce(in text: String, run: String) -> Nonce? {
        guard let range = text.range(of: "pf:", options: .backwards) else { return nil }
        let rest = text[range.upperBound...]
        let head = rest.prefix { $0.isHexDigit }
        // `pf:<digits>` without a run id is the marker of a build before run ids: another run.
        let legacy: Nonce? = !head.isEmpty && head.allSatisfy(\.isNumber) ? .otherRun : nil
        let after = rest.dropFirst(head.count)
        guard !head.isEmpty, after.first == ":", let send = Int(after.dropFirst().prefix { $0.isNumber }) else { return legacy }
        return head == run ? .this(send) : .otherRun
    }

    /// The secure payload of a send: run, nonce and recipient, so a fetch proves whose it was.
    static func securePayload(send: Int, recipient: String, run: String) -> String { "pf:\(run):\(send):\(recipient)" }

    /// Parses a secure payload into its nonce and recipient.
    static func parseSecurePayload(_ text: String, run: String) -> (nonce: Nonce, recipient: String)? {
        let parts = text.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "pf", let nonce = Int(parts[2]) else { return nil }
        return (parts[1] == run ? .this(nonce) : .otherRun, String(parts[3]))
    }

    init(frame: PushFrame, run: String) {
        let body = frame.body
        switch frame.platform {
        case .wns, .mpns:
            if frame.pushType == "wns/raw" {
                if let object = Self.object(body), let id = object["richId"] as? String {
                    self = .rich(id: id, nonce: (object["richMessage"] as? String).flatMap { Self.nonce(in: $0, run: run) })
                } else {
                    self = body.isEmpty ? .unrecognised : .secure(id: body)
                }
            } else {
                self = .plain(nonce: Self.nonce(in: Self.toastText(body) ?? "", run: run))
            }
        case .apns:
            let object = Self.object(body) ?? [:]
            self = Self.fromFields(object, alert: (object["aps"] as? [String: Any])?["alert"] as? String, run: run)
        case .fcm:
            let message = Self.object(body)?["message"] as? [String: Any]
            let data = message?["data"] as? [String: Any] ?? [:]
            self = Self.fromFields(data, alert: data["message"] as? String, run: run)
        }
    }

    private static func fromFields(_ fields: [String: Any], alert: String?, run: String) -> PushContent {
        if let id = fields["secureId"] as? String { return .secure(id: id) }
        if let id = fields["richId"] as? String {
            return .rich(id: id, nonce: (fields["richMessage"] as? String).flatMap { nonce(in: $0, run: run) })
        }
        if let alert { return .plain(nonce: nonce(in: alert, run: run)) }
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
