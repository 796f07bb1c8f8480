import Foundation
import PushFleetWebPush

/// The platform a registration or a native send is for, by its `ServiceBusNotification-Format` name.
public enum HubPlatform: String, Sendable, Hashable, CaseIterable {
    case apple
    /// Legacy FCM (the `gcm` format, `GcmRegistrationDescription`/`FcmRegistrationDescription`).
    case gcm
    case fcmv1
    case windows
    /// Web Push: the handle is the subscription's endpoint, with its keys beside it.
    case browser

    /// The format header's value (case-insensitive; `fcmV1` and `FcmV1` are the same).
    public init?(format: some StringProtocol) {
        self.init(rawValue: format.lowercased())
    }

    /// The installation `platform` value (`apns`, `gcm`/`fcm`, `fcmv1`, `wns`).
    public init?(installationPlatform name: some StringProtocol) {
        switch name.lowercased() {
        case "apns": self = .apple
        case "gcm", "fcm": self = .gcm
        case "fcmv1": self = .fcmv1
        case "wns": self = .windows
        case "browser": self = .browser
        default: return nil
        }
    }

    public var installationName: String {
        switch self {
        case .apple: "apns"
        case .gcm: "gcm"
        case .fcmv1: "fcmv1"
        case .windows: "wns"
        case .browser: "browser"
        }
    }
}

/// A browser subscription's keys (`P256DH`, `Auth`), which the hub encrypts its pushes for.
public struct BrowserKeys: Sendable, Equatable, Hashable {
    public var p256dh: String
    public var auth: String

    /// Nil unless they are a P-256 point and a 16-byte secret (base64url), checked where they enter.
    public init?(p256dh: String, auth: String) {
        let p256dh = p256dh.trimmingCharacters(in: .whitespacesAndNewlines)
        let auth = auth.trimmingCharacters(in: .whitespacesAndNewlines)
        guard p256dh.utf8.count <= 200, auth.utf8.count <= 100, (try? WebPushRecipient(p256dh: p256dh, auth: auth)) != nil else { return nil }
        self.p256dh = p256dh
        self.auth = auth
    }

    public static let requirement = "P256DH must be the subscription's P-256 public key and Auth its 16-byte secret, both base64url"

    /// Whether `text` can be a subscription's endpoint: an absolute http(s) URL with a host.
    public static func isEndpoint(_ text: String) -> Bool {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), let host = url.host else { return false }
        return (scheme == "https" || scheme == "http") && !host.isEmpty
    }

    public static let endpointRequirement = "a browser's endpoint must be an absolute http(s) URL"
}

/// One registration as the hub keeps it: a native or template registration of one device
/// handle, with tags. Installations are kept as the registrations they expand to, as the
/// service does (tagged `$InstallationId:{id}`).
public struct HubRegistration: Sendable, Equatable {
    public struct Template: Sendable, Equatable {
        public var body: String
        public var name: String?
        /// Apple: `Expiry` (a template expression or a date); passed on as `apns-expiration`.
        public var expiry: String?
        /// Apple: `Priority`.
        public var priority: String?
        /// `ApnsHeaders` or `WnsHeaders`, in order.
        public var headers: [Header]

        public init(body: String, name: String? = nil, expiry: String? = nil, priority: String? = nil, headers: [Header] = []) {
            self.body = body
            self.name = name
            self.expiry = expiry
            self.priority = priority
            self.headers = headers
        }
    }

    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public var id: String
    public var platform: HubPlatform
    /// The device token, FCM registration token or WNS channel URI.
    public var handle: String
    /// In the order given, without duplicates.
    public var tags: [String]
    /// The `PushVariables` JSON object, kept verbatim.
    public var pushVariables: String?
    public var secondaryTileName: String?
    public var template: Template?
    /// Starts at 1; each update adds 1.
    public var etag: Int = 1
    /// Wall-clock nanoseconds; nil for never.
    public var expiresAt: Int64?
    public var updatedAt: Int64 = 0
    public var createdAt: Int64 = 0
    /// Set for the registrations an installation expands to.
    public var installationID: String?
    /// A browser registration's keys (its handle is the endpoint).
    public var browserKeys: BrowserKeys?

    public init(
        id: String,
        platform: HubPlatform,
        handle: String,
        tags: [String] = [],
        pushVariables: String? = nil,
        secondaryTileName: String? = nil,
        template: Template? = nil,
        browserKeys: BrowserKeys? = nil
    ) {
        self.id = id
        self.platform = platform
        self.handle = handle
        self.tags = tags
        self.pushVariables = pushVariables
        self.secondaryTileName = secondaryTileName
        self.template = template
        self.browserKeys = browserKeys
    }

    public var tagSet: Set<String> { Set(tags) }

    /// The key a handle is found by: APNs tokens are hex, compared without regard to case.
    /// A handle as the hub keeps it from the moment it enters (a registration, an installation,
    /// a direct send): APNs tokens are hex whose case means nothing, kept in lower case as the
    /// push service keys its devices.
    public static func normalizedHandle(_ handle: String, platform: HubPlatform) -> String {
        platform == .apple ? handle.lowercased() : handle
    }

    public static func handleKey(_ handle: String, platform: HubPlatform) -> String {
        platform == .apple ? handle.lowercased() : handle
    }

    public var handleKey: String { Self.handleKey(handle, platform: platform) }
}
