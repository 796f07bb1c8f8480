/// The receiving side of a description: how each platform's device token looks, and where a
/// push carries what the ledger needs (the nonce, or the id of stored secure or rich content).
public struct ReceiveDescription: Sendable, Equatable {
    public var tokens: [Scenario.PlatformName: TokenShape]
    public var layouts: [Scenario.PlatformName: PushLayout]
    public var webPush: WebPushReceive

    public init(
        tokens: [Scenario.PlatformName: TokenShape] = [:], layouts: [Scenario.PlatformName: PushLayout] = [:], webPush: WebPushReceive = .init()
    ) {
        self.tokens = tokens
        self.layouts = layouts
        self.webPush = webPush
    }

    public func token(_ platform: Scenario.PlatformName) -> TokenShape {
        tokens[platform] ?? platform.defaultToken
    }

    public func layout(_ platform: Scenario.PlatformName) -> PushLayout {
        layouts[platform] ?? PushLayout()
    }
}

/// How a device's push token looks to the backend.
public enum TokenShape: String, Sendable, Equatable, CaseIterable {
    /// 64 hex digits, as APNs device tokens are.
    case apnsHex = "apns_hex"
    /// An FCM-like registration token (`fcm_<run id>_<random>`; URL-safe characters).
    case fcm
    /// An opaque channel id (the mock push service's `/wns/{channel}` path segment).
    case channelID = "channel_id"
    /// A WNS channel URL pointing at the push service (`http://…/wns/{channel}`): the backend
    /// posts to the URL it was given, as it would to Microsoft's.
    case channelURL = "channel_url"
    /// A browser's Push API subscription as JSON (`{"endpoint":…,"keys":{"p256dh":…,"auth":…}}`),
    /// the endpoint minted by the push service.
    case subscription
}

extension Scenario.PlatformName {
    public var defaultToken: TokenShape {
        switch self {
        case .apns: .apnsHex
        case .fcm: .fcm
        case .wns: .channelID
        case .webpush: .subscription
        }
    }
}

/// Where one platform's pushes carry the send's nonce and stored content's ids.
///
/// A push is read in this order: a rich id (with the message that carries the nonce), a secure
/// id, then the nonce of a plain push. Every location is a JSON Pointer into the push body the
/// backend sent (the APNs payload, the whole FCM v1 request, the WNS body) or the whole body,
/// and may be limited to one push type (`wns/raw`).
public struct PushLayout: Sendable, Equatable {
    public var richID: [PushLocation]
    public var richMessage: [PushLocation]
    public var secureID: [PushLocation]
    /// Where a plain push's nonce is; empty: anywhere in the body (the run's nonces are unique
    /// markers).
    public var nonce: [PushLocation]

    public init(richID: [PushLocation] = [], richMessage: [PushLocation] = [], secureID: [PushLocation] = [], nonce: [PushLocation] = []) {
        self.richID = richID
        self.richMessage = richMessage
        self.secureID = secureID
        self.nonce = nonce
    }
}

public struct PushLocation: Sendable, Equatable, CustomStringConvertible {
    /// `.json` or `.body`; a header means nothing in a push.
    public var location: ValueLocation
    /// Only pushes of this type (`apns-push-type`, `X-WNS-Type`) are read here.
    public var pushType: String?

    public init(_ location: ValueLocation, pushType: String? = nil) {
        self.location = location
        self.pushType = pushType
    }

    public var description: String {
        location.description + (pushType.map { " (\($0) pushes)" } ?? "")
    }
}
