import PushFleetCore

extension PushFrame {
    /// The frame as the JSON text `JSONEncoder` writes (members in declaration order, absent
    /// optionals left out, slashes unescaped), written in one pass: the gateway writes one per
    /// push, and `JSONEncoder`'s generic containers cost more than the rest of the write.
    public var encodedJSON: String {
        var out = "{\"type\":" + JSONText.quoted(type)
        out += ",\"platform\":" + JSONText.quoted(platform.rawValue)
        out += ",\"token\":" + JSONText.quoted(token)
        out += ",\"id\":" + JSONText.quoted(id)
        out += ",\"acceptedAt\":" + String(acceptedAt)
        out += ",\"pushType\":" + JSONText.quoted(pushType)
        out += ",\"body\":" + JSONText.quoted(body)
        if let bodyEncoding { out += ",\"bodyEncoding\":" + JSONText.quoted(bodyEncoding) }
        out += stored ? ",\"stored\":true" : ",\"stored\":false"
        if let reason { out += ",\"reason\":" + JSONText.quoted(reason) }
        if let push { out += ",\"push\":" + String(push) }
        if let writtenAt { out += ",\"writtenAt\":" + String(writtenAt) }
        if let hubAt { out += ",\"hubAt\":" + String(hubAt) }
        if let delay { out += ",\"delay\":" + String(delay) }
        if let webPush {
            out += ",\"webPush\":{"
            var first = true
            func member(_ name: String, _ value: String?) {
                guard let value else { return }
                out += (first ? "\"" : ",\"") + name + "\":" + JSONText.quoted(value)
                first = false
            }
            member("contentEncoding", webPush.contentEncoding)
            member("encryption", webPush.encryption)
            member("cryptoKey", webPush.cryptoKey)
            member("urgency", webPush.urgency)
            member("topic", webPush.topic)
            out += (first ? "\"" : ",\"") + "ttl\":" + String(webPush.ttl) + "}"
        }
        return out + "}"
    }
}

extension SendOutcome {
    /// The outcome as the backend's JSON encoder writes it (sorted keys, absent id left out), in
    /// one pass: the backend answers one per send.
    public var encodedJSON: String {
        var out = "{\"accepted\":" + String(accepted) + ",\"failed\":" + String(failed)
        if let id { out += ",\"id\":" + JSONText.quoted(id) }
        out += ",\"outcome\":" + JSONText.quoted(outcome.rawValue)
        return out + ",\"removed\":" + String(removed) + ",\"targets\":" + String(targets) + "}"
    }
}

extension SecureNotification {
    /// The notification as the backend's JSON encoder writes it (sorted keys, slashes unescaped),
    /// in one pass: the backend answers one per secure push fetched.
    public var encodedJSON: String {
        "{\"Id\":" + JSONText.quoted(id) + ",\"Payload\":" + JSONText.quoted(payload) + ",\"Read\":" + (read ? "true" : "false") + "}"
    }
}
