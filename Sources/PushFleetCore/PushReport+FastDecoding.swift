/// A push service's report read in one pass (`StrictJSONReader`): a run watching over
/// `/observe` decodes one per push, and `JSONDecoder` spent ~5% of the fleet's CPU per push on
/// them. Nil for anything it is not sure of (hub notes among them, which are rare), for the
/// caller to decode with `JSONDecoder`; the answer is the same either way.
extension PushReport {
    public init?(fastJSON bytes: UnsafeBufferPointer<UInt8>) {
        var reader = StrictJSONReader(bytes: bytes)
        var hops: [PushHop]?
        var lost: Int??
        var seen = SeenKeys()
        let read: Void? = reader.object { reader, name in
            switch name {
            case "hops":
                guard seen.first(0) else { return false }
                guard let list = reader.elements(PushHop.read) else { return false }
                hops = list
                return true
            case "lost":
                guard seen.first(1) else { return false }
                lost = reader.optional { $0.integer().flatMap { Int(exactly: $0) } }
                return lost != nil
            case "hub":
                // Only an absent list of hub notes is read here.
                return seen.first(2) && reader.literal("null")
            default:
                return reader.skipScalar()
            }
        }
        reader.skipSpace()
        guard read != nil, reader.atEnd, let hops else { return nil }
        self.init(hops: hops, hub: nil, lost: lost ?? nil)
    }
}

extension PushHop {
    private enum Key: String, CaseIterable {
        case push, step, at, platform, token, body, base64, status, reason, delay, then, trace
        case pushType = "push_type"
        case hubAt = "hub_at"
    }

    fileprivate static func read(_ reader: inout StrictJSONReader) -> PushHop? {
        var push: UInt64?, step: Step?, at: Int64?, platform: String?, token: String?
        var pushType: String??, body: String??, base64: Bool??, hubAt: Int64??, status: Int??, reason: String??, delay: Int64??, then: Int64??, trace: String??
        var seen = SeenKeys()
        let read: Void? = reader.object { reader, name in
            guard let key = Key(rawValue: name) else { return reader.skipScalar() }
            guard seen.first(Key.allCases.firstIndex(of: key)!) else { return false }
            switch key {
            case .push: push = reader.unsigned(); return push != nil
            case .step: step = reader.string().flatMap(Step.init(rawValue:)); return step != nil
            case .at: at = reader.integer(); return at != nil
            case .platform: platform = reader.string(); return platform != nil
            case .token: token = reader.string(); return token != nil
            case .pushType: pushType = reader.optional { $0.string() }; return pushType != nil
            case .body: body = reader.optional { $0.string() }; return body != nil
            case .base64: base64 = reader.optional { $0.boolean() }; return base64 != nil
            case .hubAt: hubAt = reader.optional { $0.integer() }; return hubAt != nil
            case .status: status = reader.optional { $0.integer().flatMap { Int(exactly: $0) } }; return status != nil
            case .reason: reason = reader.optional { $0.string() }; return reason != nil
            case .delay: delay = reader.optional { $0.integer() }; return delay != nil
            case .then: then = reader.optional { $0.integer() }; return then != nil
            case .trace: trace = reader.optional { $0.string() }; return trace != nil
            }
        }
        guard read != nil, let push, let step, let at, let platform, let token else { return nil }
        return PushHop(
            push: push, step: step, at: at, platform: platform, token: token, pushType: pushType ?? nil, body: body ?? nil,
            base64: base64 ?? nil, hubAt: hubAt ?? nil, status: status ?? nil, reason: reason ?? nil, delay: delay ?? nil, then: then ?? nil,
            trace: trace ?? nil
        )
    }
}
