import PushFleetCore

extension PushFrame {
    /// The frame as the JSON text `JSONEncoder` writes (members in declaration order, absent
    /// optionals left out, slashes unescaped), written in one pass: the gateway writes one per
    /// push, and `JSONEncoder`'s generic containers cost more than the rest of the write.
    public var encodedJSON: String {
        var out = "{\"type\":"
        out.reserveCapacity(160 + token.utf8.count + id.utf8.count + body.utf8.count)
        JSONText.appendQuoted(type, to: &out)
        out += ",\"platform\":"
        JSONText.appendQuoted(platform.rawValue, to: &out)
        out += ",\"token\":"
        JSONText.appendQuoted(token, to: &out)
        out += ",\"id\":"
        JSONText.appendQuoted(id, to: &out)
        out += ",\"acceptedAt\":" + String(acceptedAt)
        out += ",\"pushType\":"
        JSONText.appendQuoted(pushType, to: &out)
        out += ",\"body\":"
        JSONText.appendQuoted(body, to: &out)
        if let bodyEncoding {
            out += ",\"bodyEncoding\":"
            JSONText.appendQuoted(bodyEncoding, to: &out)
        }
        out += stored ? ",\"stored\":true" : ",\"stored\":false"
        if let reason {
            out += ",\"reason\":"
            JSONText.appendQuoted(reason, to: &out)
        }
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
        if let trace {
            out += ",\"trace\":"
            JSONText.appendQuoted(trace, to: &out)
        }
        if let collapseKey {
            out += ",\"collapseKey\":"
            JSONText.appendQuoted(collapseKey, to: &out)
        }
        return out + "}"
    }
}

extension SendOutcome {
    /// The outcome as the backend's JSON encoder writes it (sorted keys, absent id left out), in
    /// one pass: the backend answers one per send.
    public var encodedJSON: String {
        var out = "{\"accepted\":" + String(accepted) + ",\"failed\":" + String(failed)
        if let id {
            out += ",\"id\":"
            JSONText.appendQuoted(id, to: &out)
        }
        out += ",\"outcome\":"
        JSONText.appendQuoted(outcome.rawValue, to: &out)
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
