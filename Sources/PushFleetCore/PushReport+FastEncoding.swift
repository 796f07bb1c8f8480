/// A push service's report written in one pass: `/observe` sends one per push, and
/// `JSONEncoder` (its boxes, coding keys and generic containers) spent ~1.5% of `serve`'s CPU per
/// secure push on them. The text decodes to the same report with `JSONDecoder` as with
/// ``PushReport/init(fastJSON:)``; nil members are left out, as `JSONEncoder` leaves them.
extension PushReport {
    public var json: String {
        var out = JSONBytes(capacity: 0)
        encodeJSON(into: &out)
        return out.text
    }

    /// ``json``'s bytes, appended to `out`.
    public func encodeJSON(into out: inout JSONBytes) {
        out.bytes.reserveCapacity(out.bytes.count + 64 + hops.count * 200)
        out.raw("{\"hops\":[")
        for (index, hop) in hops.enumerated() {
            if index > 0 { out.raw(",") }
            hop.encodeJSON(into: &out)
        }
        out.raw("]")
        if let hub {
            out.raw(",\"hub\":[")
            for (index, note) in hub.enumerated() {
                if index > 0 { out.raw(",") }
                out.raw("{\"at\":")
                out.integer(note.at)
                out.raw(",\"body\":")
                out.quoted(note.body)
                out.raw(",\"format\":")
                out.quoted(note.format)
                out.raw(",\"targets\":")
                out.integer(note.targets)
                out.raw("}")
            }
            out.raw("]")
        }
        if let lost {
            out.raw(",\"lost\":")
            out.integer(lost)
        }
        out.raw("}")
    }
}

extension PushHop {
    fileprivate func encodeJSON(into out: inout JSONBytes) {
        out.raw("{\"push\":")
        out.integer(push)
        out.raw(",\"step\":")
        out.quoted(step.rawValue)
        out.raw(",\"at\":")
        out.integer(at)
        out.raw(",\"platform\":")
        out.quoted(platform)
        out.raw(",\"token\":")
        out.quoted(token)
        if let pushType {
            out.raw(",\"push_type\":")
            out.quoted(pushType)
        }
        if let body {
            out.raw(",\"body\":")
            out.quoted(body)
        }
        if let base64 {
            out.raw(",\"base64\":")
            out.bool(base64)
        }
        if let hubAt {
            out.raw(",\"hub_at\":")
            out.integer(hubAt)
        }
        if let status {
            out.raw(",\"status\":")
            out.integer(status)
        }
        if let reason {
            out.raw(",\"reason\":")
            out.quoted(reason)
        }
        if let delay {
            out.raw(",\"delay\":")
            out.integer(delay)
        }
        if let then {
            out.raw(",\"then\":")
            out.integer(then)
        }
        if let trace {
            out.raw(",\"trace\":")
            out.quoted(trace)
        }
        out.raw("}")
    }
}
