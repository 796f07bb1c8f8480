/// A value a template puts into a request: text, or JSON kept as its source text (a number,
/// `true`, an object taken from an answer), so a body gets back the type the backend gave.
public enum APIValue: Sendable, Equatable, Hashable, CustomStringConvertible {
    case text(String)
    case json(String)

    /// The value as plain text: a JSON value's source (`5`, `true`, `{"a":1}`).
    public var string: String {
        switch self {
        case .text(let text), .json(let text): text
        }
    }

    public var description: String { string }
}

/// Where a template variable's value comes from, resolved when the description is compiled so
/// that rendering never looks a name up.
public enum VariableRef: Sendable, Hashable {
    /// A value the run provides (`{{user}}`, `{{device.push_token}}`, `{{message}}` …).
    case builtin(BuiltinVariable)
    /// A value an answer provided, kept per user (from `login`), per device (from `register`) or
    /// for the rest of one step (from any other step).
    case stored(VariableScope, slot: Int)
}

public enum VariableScope: String, Sendable, Hashable, CaseIterable {
    case user, device, local
}

/// The values pushfleet provides to templates.
public enum BuiltinVariable: String, Sendable, Hashable, CaseIterable {
    /// The acting user's name and password, and `Basic base64(user:password)`.
    case user, password
    case basicAuth = "basic_auth"
    /// The device's push token as the backend is given it (an APNs hex token, an FCM token, a WNS
    /// channel URL …), its platform in the backend's naming, and a stable id of 16 hex digits.
    case devicePushToken = "device.push_token"
    case devicePlatform = "device.platform"
    case deviceID = "device.id"
    /// A browser's subscription, field by field, for a backend that stores them apart (its
    /// endpoint, and its keys' `p256dh` and `auth`); `device.push_token` is the whole JSON.
    case deviceEndpoint = "device.endpoint"
    case deviceP256dh = "device.p256dh"
    case deviceAuth = "device.auth"
    /// The platform a per-platform send goes to, in the backend's naming.
    case platform
    /// The recipient's user name.
    case to
    /// What a send delivers: the nonce text of a plain or rich send, the payload of a secure one.
    case message
    /// The base64 bytes of a rich send's image, and their content type.
    case image
    case imageType = "image_type"
    /// The content id a push named, for a fetch.
    case id
    /// Another user, whose registration a leak probe tries to claim.
    case victim
    /// The run id (12 hex digits).
    case run

    /// Where each may be used: a variable needs something in the step to give it a value.
    public var availability: Set<APIStepKind.Family> {
        switch self {
        case .user, .password, .basicAuth, .run: Set(APIStepKind.Family.allCases)
        case .devicePushToken, .devicePlatform, .deviceID, .deviceEndpoint, .deviceP256dh, .deviceAuth: [.device, .fetch, .probe]
        case .platform, .to, .message: [.send]
        case .image, .imageType: [.send]
        case .id: [.fetch]
        case .victim: [.probe]
        }
    }
}
