public import PushFleetCore

extension PushFrame {
    /// The frame as the JSON text `JSONEncoder` writes (members in declaration order, absent
    /// optionals left out, slashes unescaped), written in one pass: the gateway writes one per
    /// push, and `JSONEncoder`'s generic containers cost more than the rest of the write.
    public var encodedJSON: String {
        var out = JSONBytes(capacity: 0)
        encodeJSON(into: &out)
        return out.text
    }

    /// ``encodedJSON``'s bytes, appended to `out`.
    public func encodeJSON(into out: inout JSONBytes) {
        out.bytes.reserveCapacity(out.bytes.count + 200 + token.utf8.count + id.utf8.count + body.utf8.count + (trace?.utf8.count ?? 0))
        out.raw("{\"type\":")
        out.quoted(type)
        out.raw(",\"platform\":")
        out.quoted(platform.rawValue)
        out.raw(",\"token\":")
        out.quoted(token)
        out.raw(",\"id\":")
        out.quoted(id)
        out.raw(",\"acceptedAt\":")
        out.integer(acceptedAt)
        out.raw(",\"pushType\":")
        out.quoted(pushType)
        out.raw(",\"body\":")
        out.quoted(body)
        if let bodyEncoding {
            out.raw(",\"bodyEncoding\":")
            out.quoted(bodyEncoding)
        }
        out.raw(",\"stored\":")
        out.bool(stored)
        if let reason {
            out.raw(",\"reason\":")
            out.quoted(reason)
        }
        if let push {
            out.raw(",\"push\":")
            out.integer(push)
        }
        if let writtenAt {
            out.raw(",\"writtenAt\":")
            out.integer(writtenAt)
        }
        if let hubAt {
            out.raw(",\"hubAt\":")
            out.integer(hubAt)
        }
        if let delay {
            out.raw(",\"delay\":")
            out.integer(delay)
        }
        if let webPush {
            out.raw(",\"webPush\":{")
            var first = true
            func member(_ name: StaticString, _ value: String?) {
                guard let value else { return }
                out.raw(first ? "\"" : ",\"")
                out.raw(name)
                out.raw("\":")
                out.quoted(value)
                first = false
            }
            member("contentEncoding", webPush.contentEncoding)
            member("encryption", webPush.encryption)
            member("cryptoKey", webPush.cryptoKey)
            member("urgency", webPush.urgency)
            member("topic", webPush.topic)
            out.raw(first ? "\"ttl\":" : ",\"ttl\":")
            out.integer(webPush.ttl)
            out.raw("}")
        }
        if let trace {
            out.raw(",\"trace\":")
            out.quoted(trace)
        }
        if let collapseKey {
            out.raw(",\"collapseKey\":")
            out.quoted(collapseKey)
        }
        out.raw("}")
    }
}

extension SendOutcome {
    /// The outcome as the backend's JSON encoder writes it (sorted keys, absent id left out), in
    /// one pass: the backend answers one per send.
    public var encodedJSON: String { jsonBytes.text }

    /// ``encodedJSON`` as UTF-8 bytes, the answer's body as it is.
    public var jsonBytes: JSONBytes {
        var out = JSONBytes(capacity: 128)
        out.raw("{\"accepted\":")
        out.integer(accepted)
        out.raw(",\"failed\":")
        out.integer(failed)
        if let id {
            out.raw(",\"id\":")
            out.quoted(id)
        }
        out.raw(",\"outcome\":")
        out.quoted(outcome.rawValue)
        out.raw(",\"removed\":")
        out.integer(removed)
        out.raw(",\"targets\":")
        out.integer(targets)
        out.raw("}")
        return out
    }
}

extension SecureNotification {
    /// The notification as the backend's JSON encoder writes it (sorted keys, slashes unescaped),
    /// in one pass: the backend answers one per secure push fetched.
    public var encodedJSON: String { jsonBytes.text }

    /// ``encodedJSON`` as UTF-8 bytes, the answer's body as it is.
    public var jsonBytes: JSONBytes {
        var out = JSONBytes(capacity: 48 + id.utf8.count + payload.utf8.count)
        out.raw("{\"Id\":")
        out.quoted(id)
        out.raw(",\"Payload\":")
        out.quoted(payload)
        out.raw(",\"Read\":")
        out.bool(read)
        out.raw("}")
        return out
    }
}
