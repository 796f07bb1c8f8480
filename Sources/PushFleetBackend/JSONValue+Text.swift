import PushFleetCore

extension JSONValue {
    /// The value as JSON text in one pass, members in key order (as `JSONEncoder` with
    /// `.sortedKeys` writes it, slashes unescaped): the backend encodes a provider body for every
    /// push, and `JSONEncoder`'s generic containers were ~3% of `serve`'s CPU per secure push.
    var jsonText: String {
        var out = ""
        write(to: &out)
        return out
    }

    func write(to out: inout String) {
        switch self {
        case .string(let text): out += JSONText.quoted(text)
        case .int(let number): out += String(number)
        case .object(let members): Self.write(members, to: &out)
        }
    }

    static func write(_ members: [String: JSONValue], to out: inout String) {
        out += "{"
        for (index, key) in members.keys.sorted().enumerated() {
            if index > 0 { out += "," }
            out += JSONText.quoted(key)
            out += ":"
            members[key]!.write(to: &out)
        }
        out += "}"
    }

    /// An object's JSON text.
    static func text(_ members: [String: JSONValue]) -> String {
        var out = ""
        write(members, to: &out)
        return out
    }
}
