/// A push service's report written in one pass: `/observe` sends one per push, and
/// `JSONEncoder` (its boxes, coding keys and generic containers) spent ~1.5% of `serve`'s CPU per
/// secure push on them. The text decodes to the same report with `JSONDecoder` as with
/// ``PushReport/init(fastJSON:)``; nil members are left out, as `JSONEncoder` leaves them.
extension PushReport {
    public var json: String {
        var out = "{\"hops\":["
        out.reserveCapacity(64 + hops.count * 160)
        for (index, hop) in hops.enumerated() {
            if index > 0 { out += "," }
            hop.append(to: &out)
        }
        out += "]"
        if let hub {
            out += ",\"hub\":["
            for (index, note) in hub.enumerated() {
                if index > 0 { out += "," }
                out += "{\"at\":\(note.at),\"body\":"
                JSONText.appendQuoted(note.body, to: &out)
                out += ",\"format\":"
                JSONText.appendQuoted(note.format, to: &out)
                out += ",\"targets\":\(note.targets)}"
            }
            out += "]"
        }
        if let lost { out += ",\"lost\":\(lost)" }
        out += "}"
        return out
    }
}

extension PushHop {
    fileprivate func append(to out: inout String) {
        out += "{\"push\":\(push),\"step\":"
        JSONText.appendQuoted(step.rawValue, to: &out)
        out += ",\"at\":\(at),\"platform\":"
        JSONText.appendQuoted(platform, to: &out)
        out += ",\"token\":"
        JSONText.appendQuoted(token, to: &out)
        if let pushType {
            out += ",\"push_type\":"
            JSONText.appendQuoted(pushType, to: &out)
        }
        if let body {
            out += ",\"body\":"
            JSONText.appendQuoted(body, to: &out)
        }
        if let base64 { out += base64 ? ",\"base64\":true" : ",\"base64\":false" }
        if let hubAt { out += ",\"hub_at\":\(hubAt)" }
        if let status { out += ",\"status\":\(status)" }
        if let reason {
            out += ",\"reason\":"
            JSONText.appendQuoted(reason, to: &out)
        }
        if let delay { out += ",\"delay\":\(delay)" }
        if let then { out += ",\"then\":\(then)" }
        if let trace {
            out += ",\"trace\":"
            JSONText.appendQuoted(trace, to: &out)
        }
        out += "}"
    }
}
