/// A platform push service that a device registers with.
///
/// `gcm` (the name in older texts) is accepted on input and means ``fcm``.
/// `mpns` registrations are stored, as the seed backend stores them, but nothing is ever sent to
/// them: the service was retired and the seed's send paths never target it.
public enum Platform: String, Codable, Sendable, CaseIterable, Hashable {
    case apns
    case fcm
    case wns
    case mpns
    /// A browser's Web Push subscription (RFC 8030): its token is the last part of the endpoint
    /// the push service minted.
    case webpush

    /// Parses a platform name as a client or an API caller spells it (case-insensitive, `gcm` → `fcm`).
    public init?(name: some StringProtocol) {
        switch name.lowercased() {
        case "apns": self = .apns
        case "fcm", "gcm": self = .fcm
        case "wns": self = .wns
        case "mpns": self = .mpns
        case "webpush": self = .webpush
        default: return nil
        }
    }

    /// Platforms the mock push service implements and the backend sends to.
    public static let pushable: [Platform] = [.apns, .fcm, .wns, .webpush]
}

/// One device's address at the push service: its platform and its push token (or channel id).
public struct DeviceAddress: Codable, Sendable, Hashable, CustomStringConvertible {
    public var platform: Platform
    public var token: String

    public init(platform: Platform, token: String) {
        self.platform = platform
        self.token = token
    }

    public var description: String { "\(platform.rawValue):\(token)" }
}
