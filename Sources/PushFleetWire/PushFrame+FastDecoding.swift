import PushFleetCore

/// A push frame read in one pass over its bytes, without Foundation's `JSONDecoder`: decoding
/// every push through `Codable` cost ~14% of the fleet's CPU per push.
///
/// It reads only what it is sure of — an object whose keys it knows, each once, with plain
/// integers, `true`/`false`, strings (escapes included) and `null` for optional fields — and
/// answers nil for anything else (a Web Push frame's nested headers, a number with a fraction or
/// an exponent, a repeated key, anything that is not JSON), so the caller decodes those with
/// `JSONDecoder` and the answer is the same either way.
extension PushFrame {
    public init?(fastJSON bytes: UnsafeBufferPointer<UInt8>) {
        var reader = StrictJSONReader(bytes: bytes)
        guard let frame = Self.read(&reader) else { return nil }
        self = frame
    }

    private enum Key: String, CaseIterable {
        case type, platform, token, id, acceptedAt, pushType, body, bodyEncoding, stored, reason, push, writtenAt, hubAt, delay, trace, collapseKey
    }

    private static func read(_ reader: inout StrictJSONReader) -> PushFrame? {
        var type: String?, platform: Platform?, token: String?, id: String?, acceptedAt: Int64?, pushType: String?, body: String?
        var stored: Bool?
        var bodyEncoding: String??, reason: String??, push: UInt64??, writtenAt: Int64??, hubAt: Int64??, delay: Int64??, trace: String??
        var collapseKey: String??
        var seen = SeenKeys()
        let read: Void? = reader.object { reader, name in
            // Not a field of a frame: sure of it only if it is a plain value.
            guard let key = Key(rawValue: name) else { return reader.skipScalar() }
            guard seen.first(Key.allCases.firstIndex(of: key)!) else { return false }
            switch key {
            case .type: type = reader.string()
            case .platform: platform = reader.string().flatMap(Platform.init(rawValue:))
            case .token: token = reader.string()
            case .id: id = reader.string()
            case .acceptedAt: acceptedAt = reader.integer()
            case .pushType: pushType = reader.string()
            case .body: body = reader.string()
            case .stored: stored = reader.boolean()
            case .bodyEncoding: bodyEncoding = reader.optional { $0.string() }; return bodyEncoding != nil
            case .reason: reason = reader.optional { $0.string() }; return reason != nil
            case .push: push = reader.optional { $0.unsigned() }; return push != nil
            case .writtenAt: writtenAt = reader.optional { $0.integer() }; return writtenAt != nil
            case .hubAt: hubAt = reader.optional { $0.integer() }; return hubAt != nil
            case .delay: delay = reader.optional { $0.integer() }; return delay != nil
            case .trace: trace = reader.optional { $0.string() }; return trace != nil
            case .collapseKey: collapseKey = reader.optional { $0.string() }; return collapseKey != nil
            }
            // A required field read as nil is one the reader was not sure of.
            switch key {
            case .type: return type != nil
            case .platform: return platform != nil
            case .token: return token != nil
            case .id: return id != nil
            case .acceptedAt: return acceptedAt != nil
            case .pushType: return pushType != nil
            case .body: return body != nil
            case .stored: return stored != nil
            default: return true
            }
        }
        reader.skipSpace()
        guard read != nil, reader.atEnd, let type, let platform, let token, let id, let acceptedAt, let pushType, let body, let stored else {
            return nil
        }
        var frame = PushFrame(
            platform: platform, token: token, id: id, acceptedAt: acceptedAt, pushType: pushType, body: body,
            bodyEncoding: bodyEncoding ?? nil, stored: stored
        )
        frame.type = type
        frame.reason = reason ?? nil
        frame.push = push ?? nil
        frame.writtenAt = writtenAt ?? nil
        frame.hubAt = hubAt ?? nil
        frame.delay = delay ?? nil
        frame.trace = trace ?? nil
        frame.collapseKey = collapseKey ?? nil
        return frame
    }
}
