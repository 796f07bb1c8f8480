/// Frames on the device gateway of the mock push service.
///
/// A device holds a WebSocket to `GET /device?platform=P&token=T` (one device per connection) or
/// to `GET /gateway` (many devices multiplexed over one connection). Every frame is one JSON text
/// message whose `type` (server to client) or `op` (client to server) names its shape.
public enum GatewayFrame {
    /// The route of the single-device gateway.
    public static let devicePath = "/device"
    /// The route of the multiplexed gateway.
    public static let multiplexPath = "/gateway"
    /// The route a run watches its pushes on: `GET /observe?run=<run id>`, a WebSocket of
    /// `PushReport` frames (see docs/mock-push.md).
    public static let observePath = "/observe"
}

/// A push as a device receives it: the provider's request body verbatim, plus what the push
/// service knows of it.
public struct PushFrame: Codable, Sendable, Equatable {
    /// The `type` of a push the service refused for this device's token (for example as
    /// `Unregistered`): sent to the device for the record, never a delivery.
    public static let refusedType = "refused"

    /// `push`, or ``refusedType``.
    public var type: String = "push"
    public var platform: Platform
    public var token: String
    /// The id the push service gave the push (`apns-id`, the FCM message id, `X-WNS-Msg-ID`).
    public var id: String
    /// When the push service accepted the push, in nanoseconds since the Unix epoch.
    public var acceptedAt: Int64
    /// `alert`/`background` for APNs, `data` for FCM, `wns/toast`/`wns/raw`/… for WNS.
    public var pushType: String
    /// The provider's request body, byte for byte as the backend sent it: UTF-8 text, or base64
    /// when ``bodyEncoding`` is `base64` (a binary WNS raw push).
    public var body: String
    public var bodyEncoding: String?
    /// True when the push was held while the device was offline and delivered on connect.
    public var stored: Bool
    /// Why a refused push was refused (`Unregistered`).
    public var reason: String?
    /// The push service's number for the push (in its reports to a run watching it, `/observe`).
    public var push: UInt64?
    /// When the push service wrote the frame to this socket (ns since the Unix epoch).
    public var writtenAt: Int64?
    /// When the notification hub that sent the push took the send, if one did.
    public var hubAt: Int64?
    /// How long an injected latency fault held the push back (ns).
    public var delay: Int64?
    /// A Web Push message's headers: what the browser needs to decrypt it, and how it was sent.
    public var webPush: WebPushHeaders?
    /// The W3C `traceparent` the push's provider request carried: the device's part of the push
    /// (its fetch) joins that trace. Not in any real provider's payload; the mock's own.
    public var trace: String?
    /// FCM: the collapse key of a collapsible message (`android.collapse_key`; `default`, the
    /// app's own, for a notification message). A held one replaces the one held with its key.
    public var collapseKey: String?

    /// Inlinable: made for every push in another module, it is then built in place there rather
    /// than copied out of a call.
    @inlinable
    public init(
        platform: Platform,
        token: String,
        id: String,
        acceptedAt: Int64,
        pushType: String,
        body: String,
        bodyEncoding: String? = nil,
        stored: Bool = false
    ) {
        self.platform = platform
        self.token = token
        self.id = id
        self.acceptedAt = acceptedAt
        self.pushType = pushType
        self.body = body
        self.bodyEncoding = bodyEncoding
        self.stored = stored
    }
}

/// The headers of a Web Push message (RFC 8030, 8291) that reach the browser with its body.
public struct WebPushHeaders: Codable, Sendable, Equatable {
    /// `aes128gcm`, `aesgcm`, or nil for a message without a payload.
    public var contentEncoding: String?
    /// `aesgcm` only: the salt and the sender's key.
    public var encryption: String?
    public var cryptoKey: String?
    public var urgency: String?
    public var topic: String?
    /// The time to live the push service applied, in seconds.
    public var ttl: Int64

    public init(contentEncoding: String?, encryption: String? = nil, cryptoKey: String? = nil, urgency: String? = nil, topic: String? = nil, ttl: Int64) {
        self.contentEncoding = contentEncoding
        self.encryption = encryption
        self.cryptoKey = cryptoKey
        self.urgency = urgency
        self.topic = topic
        self.ttl = ttl
    }
}

/// A notice from the gateway about device state on a connection.
public struct GatewayNotice: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        /// The devices are online on this connection; any stored push was sent before this notice.
        case subscribed
        /// The devices are offline on this connection, as the client asked.
        case unsubscribed
        /// The devices were taken offline by the service (forced disconnect, or another
        /// connection took the token over).
        case disconnected
        /// The tokens are now answered `Unregistered` (the app was "uninstalled").
        case unregistered
        /// The client sent a frame the gateway could not act on; the connection stays open.
        case error
    }

    public var type: Kind
    public var devices: [DeviceAddress]
    public var reason: String?
    /// On a single device's `subscribed`: when the gateway took the device's previous
    /// connection for gone (its socket closed, or a ping went unanswered), in nanoseconds since
    /// the Unix epoch; absent when there was none, or it was still open (`tookOver`).
    public var offlineSince: Int64?
    /// On a single device's `subscribed`: the device's previous connection was still open, so
    /// this one took it over: the gateway had not found it dead.
    public var tookOver: Bool?

    public init(type: Kind, devices: [DeviceAddress] = [], reason: String? = nil, offlineSince: Int64? = nil, tookOver: Bool? = nil) {
        self.type = type
        self.devices = devices
        self.reason = reason
        self.offlineSince = offlineSince
        self.tookOver = tookOver
    }
}

/// A client's request on the gateway.
///
/// On `/device` the devices list may be omitted: it then means the connection's own device.
public struct GatewayCommand: Codable, Sendable, Equatable {
    public enum Operation: String, Codable, Sendable {
        case subscribe
        case unsubscribe
        case unregister
        /// The device has these pushes (by the service's number): a connection opened with
        /// `ack=1` hands them back to the hold, were it to close first (docs/mock-push.md).
        case ack
    }

    public var op: Operation
    public var devices: [DeviceAddress]?
    /// With `ack`: the pushes' numbers (``PushFrame/push``).
    public var pushes: [UInt64]?

    public init(op: Operation, devices: [DeviceAddress]? = nil, pushes: [UInt64]? = nil) {
        self.op = op
        self.devices = devices
        self.pushes = pushes
    }
}

/// Decodes only the discriminator of a server frame, to pick the shape to decode next.
public struct GatewayFrameHeader: Decodable, Sendable {
    public var type: String
}
