import PushFleetWire

/// What each platform accepts as a device token (or channel id) in a provider request.
enum TokenRules {
    /// APNs tokens are hex; today 64 digits, and Apple warns they may grow.
    static func isValidAPNs(_ token: Substring) -> Bool {
        guard (16...200).contains(token.utf8.count), token.utf8.count % 2 == 0 else { return false }
        // On the bytes: one is checked per push, and the generic walk cost more than the check.
        var token = token
        return token.withUTF8 { $0.allSatisfy(isHex) }
    }

    /// FCM registration tokens: URL-safe characters plus ':'.
    static func isValidFCM(_ token: Substring) -> Bool {
        (1...4096).contains(token.utf8.count) && token.utf8.allSatisfy { isAlphanumeric($0) || "_-:.".utf8.contains($0) }
    }

    /// WNS channel ids: a channel URL's last path segment, or the `token` WNS's own channel
    /// URIs carry (base64, so `+`, `/` and `=` once percent-decoded).
    static func isValidWNS(_ token: Substring) -> Bool {
        (1...512).contains(token.utf8.count) && token.utf8.allSatisfy { isAlphanumeric($0) || "_-.~%+/=".utf8.contains($0) }
    }

    /// Web Push subscription ids, as this service mints them and the endpoint's last segment
    /// carries them: base64url.
    static func isValidWebPush(_ token: Substring) -> Bool {
        (16...512).contains(token.utf8.count) && token.utf8.allSatisfy { isAlphanumeric($0) || "_-".utf8.contains($0) }
    }

    /// A token as the service keys it. APNs tokens are hex whose case means nothing: they are
    /// kept in lower case wherever one enters (a provider request's path, a device's
    /// subscription), so one device has one address.
    static func normalized(_ token: Substring, for platform: Platform) -> String {
        guard platform == .apns else { return String(token) }
        // Device tokens are ASCII hex, most often lower case already: Unicode's lowercasing only
        // for what is not plain ASCII.
        var contiguous = token
        let (ascii, upper) = contiguous.withUTF8 { bytes in
            var upper = false
            for byte in bytes {
                if byte >= 0x80 { return (false, upper) }
                if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { upper = true }
            }
            return (true, upper)
        }
        guard ascii else { return token.lowercased() }
        guard upper else { return String(token) }
        return String(decoding: token.utf8.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    static func normalized(_ address: DeviceAddress) -> DeviceAddress {
        DeviceAddress(platform: address.platform, token: normalized(address.token[...], for: address.platform))
    }

    static func isValid(_ token: Substring, for platform: Platform) -> Bool {
        switch platform {
        case .apns: isValidAPNs(token)
        case .fcm: isValidFCM(token)
        case .wns: isValidWNS(token)
        case .webpush: isValidWebPush(token)
        case .mpns: false
        }
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        (48...57).contains(byte) || (97...102).contains(byte) || (65...70).contains(byte)
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (48...57).contains(byte) || (97...122).contains(byte) || (65...90).contains(byte)
    }
}
