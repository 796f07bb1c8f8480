import Foundation
import PushFleetHub
import PushFleetWire
import PushFleetCore

/// A notification in one platform's native format, as the hub hands it to the push service.
struct NativeNotification: Sendable, Equatable {
    var platform: Platform
    /// APNs `apns-push-type`, or WNS `X-WNS-Type`; unused for FCM.
    var pushType: String
    /// The provider body. For FCM it is the `message` object without the token, which the
    /// sender adds per registration.
    var body: [String: JSONValue]? {
        // A body changed after it was encoded is encoded anew.
        didSet { encodedBody = nil }
    }
    var text: String?
    var contentType: String
    /// `body` as JSON, made at once where that is cheaper than from the members: the secure
    /// push, one per send.
    var encodedBody: String?

    /// The seed's plain alert: `From <sender>: <message>` in the platform's format, encoded
    /// properly (the seed concatenated strings, so a quote in a message broke the JSON).
    static func alert(platform: Platform, from sender: String, message: String) -> NativeNotification? {
        let text = "From \(sender): \(message)"
        switch platform {
        case .apns:
            return .init(platform: .apns, pushType: "alert", body: ["aps": ["alert": .string(text)]], contentType: "application/json")
        case .fcm:
            return .init(platform: .fcm, pushType: "data", body: ["data": ["message": .string(text)]], contentType: "application/json")
        case .wns:
            let toast =
                "<toast><visual><binding template=\"ToastText01\"><text id=\"1\">\(XMLText.escape(text))</text></binding></visual></toast>"
            return .init(platform: .wns, pushType: "wns/toast", text: toast, contentType: "text/xml")
        case .webpush:
            return .init(platform: .webpush, pushType: "webpush", body: ["message": .string(text)], contentType: "application/octet-stream")
        case .mpns:
            return nil
        }
    }

    /// The push services' payload limits: APNs and FCM 4 KB, WNS 5,000 bytes; Web Push 4,096
    /// bytes of ciphertext, of which aes128gcm's header, delimiter and tag take 103.
    static func payloadLimit(_ platform: Platform) -> Int {
        switch platform {
        case .wns: 5000
        case .webpush: 4096 - 103
        default: 4096
        }
    }

    /// Bytes the provider counts against its limit (FCM's `message` wrapper and token aside,
    /// allowed for with a margin).
    var payloadSize: Int {
        if let text { return text.utf8.count }
        let encoded = JSONValue.text(body ?? [:]).utf8.count
        return platform == .fcm ? encoded + 64 : encoded
    }

    /// The provider body as JSON (`{}` when there is none).
    var bodyText: String { encodedBody ?? JSONValue.text(body ?? [:]) }

    var bodyJSON: Data { Data(bodyText.utf8) }

    /// Nil when the payload fits its platform's limit, else why not.
    var oversize: String? {
        let size = payloadSize
        let limit = Self.payloadLimit(platform)
        return size <= limit ? nil : "\(platform.rawValue) payload of \(size) bytes once encoded, over its \(limit)-byte limit"
    }

    /// Escaping grows text at most sixfold (`\u0001`, `&quot;`): below this, every payload fits.
    static func surelyFits(_ text: String) -> Bool {
        text.utf8.count * 6 + 256 <= 4096
    }

    /// `aps` of a silent push, made once: the secure flow makes one for every send.
    private static let silentAPS: JSONValue = ["content-available": 1]

    /// The silent push of the secure flow: only the id travels.
    static func secure(platform: Platform, id: String) -> NativeNotification? {
        switch platform {
        case .apns:
            return .init(
                platform: .apns, pushType: "background",
                body: ["aps": Self.silentAPS, "secureId": .string(id)], contentType: "application/json",
                encodedBody: secureAPNsText(id)
            )
        case .fcm:
            return .init(platform: .fcm, pushType: "data", body: ["data": ["secureId": .string(id)]], contentType: "application/json")
        case .wns:
            return .init(platform: .wns, pushType: "wns/raw", text: id, contentType: "application/octet-stream")
        case .webpush:
            return .init(platform: .webpush, pushType: "webpush", body: ["secureId": .string(id)], contentType: "application/octet-stream")
        case .mpns:
            return nil
        }
    }

    /// The secure push's APNs body, written into one string of its final size (a sum of
    /// strings made three on every send).
    private static func secureAPNsText(_ id: String) -> String {
        let head = #"{"aps":{"content-available":1},"secureId":"#
        var text = ""
        // An id is plain (a UUID): its quoted form is its length and two quotes.
        text.reserveCapacity(head.utf8.count + id.utf8.count + 3)
        text += head
        JSONText.appendQuoted(id, to: &text)
        text += "}"
        return text
    }

    /// The silent push of the rich flow: id, message and type; the device fetches the content.
    static func rich(platform: Platform, id: String, message: String, type: String) -> NativeNotification? {
        let fields: [String: JSONValue] = ["richId": .string(id), "richMessage": .string(message), "richType": .string(type)]
        switch platform {
        case .apns:
            var body = fields
            body["aps"] = ["content-available": 1, "sound": ""]
            return .init(platform: .apns, pushType: "background", body: body, contentType: "application/json")
        case .fcm:
            return .init(platform: .fcm, pushType: "data", body: ["data": .object(fields)], contentType: "application/json")
        case .wns:
            let text = JSONValue.text(fields)
            return .init(platform: .wns, pushType: "wns/raw", text: text, contentType: "application/octet-stream")
        case .webpush:
            return .init(platform: .webpush, pushType: "webpush", body: fields, contentType: "application/octet-stream")
        case .mpns:
            return nil
        }
    }

    /// The first character of `text` that XML 1.0 cannot hold, not even as a character
    /// reference (its `Char` production): controls but tab, line feed and carriage return, and
    /// U+FFFE and U+FFFF. Escaping cannot save such text, so WNS would refuse the toast.
    static func firstNonXMLCharacter(in text: String) -> Unicode.Scalar? {
        text.unicodeScalars.first { scalar in
            switch scalar.value {
            case 0x9, 0xA, 0xD, 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: false
            default: true
            }
        }
    }
}

/// A JSON value, for building provider bodies with exact key sets.
enum JSONValue: Sendable, Equatable, Codable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByDictionaryLiteral
{
    case string(String)
    case int(Int)
    case object([String: JSONValue])

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .int(value) }
    init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(uniqueKeysWithValues: elements))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }
}
