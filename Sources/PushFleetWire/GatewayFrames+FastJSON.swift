import PushFleetCore

/// The multiplexed gateway's commands and notices in one pass, without Foundation's coders: a
/// fleet subscribes every device it carries and reads a notice back for each batch, and through
/// `JSONEncoder` and `JSONDecoder` those cost ~11% of the fleet's CPU while a million devices
/// arrive (docs/performance.md). The reader is ``StrictJSONReader``, nil for anything it is not
/// sure of, so the caller decodes that with `JSONDecoder` and the answer is the same either way.
extension GatewayCommand {
    /// The command as JSON text that `JSONDecoder` reads back to it (members in declaration
    /// order, absent optionals left out).
    public var encodedJSON: String {
        var out = "{\"op\":"
        out.reserveCapacity(24 + (devices?.count ?? 0) * 64 + (pushes?.count ?? 0) * 20)
        JSONText.appendQuoted(op.rawValue, to: &out)
        if let devices {
            out += ",\"devices\":"
            DeviceAddress.append(devices, to: &out)
        }
        if let pushes {
            out += ",\"pushes\":["
            for (index, push) in pushes.enumerated() {
                if index > 0 { out += "," }
                out += String(push)
            }
            out += "]"
        }
        return out + "}"
    }
}

extension DeviceAddress {
    static func append(_ devices: [DeviceAddress], to out: inout String) {
        out += "["
        for (index, device) in devices.enumerated() {
            out += index == 0 ? "{\"platform\":" : ",{\"platform\":"
            JSONText.appendQuoted(device.platform.rawValue, to: &out)
            out += ",\"token\":"
            JSONText.appendQuoted(device.token, to: &out)
            out += "}"
        }
        out += "]"
    }

    /// An array of addresses (``read(_:)``); nil unless all were read.
    static func readList(_ reader: inout StrictJSONReader) -> [DeviceAddress]? {
        reader.elements(read)
    }

    /// `{"platform":…,"token":…}`, each once; other members only when plain values.
    static func read(_ reader: inout StrictJSONReader) -> DeviceAddress? {
        var platform: Platform?, token: String?
        var seen = SeenKeys()
        let read: Void? = reader.object { reader, name in
            switch name {
            case "platform":
                guard seen.first(0) else { return false }
                platform = reader.string().flatMap(Platform.init(rawValue:))
                return platform != nil
            case "token":
                guard seen.first(1) else { return false }
                token = reader.string()
                return token != nil
            default:
                return reader.skipScalar()
            }
        }
        guard read != nil, let platform, let token else { return nil }
        return DeviceAddress(platform: platform, token: token)
    }
}

extension GatewayNotice {
    /// A notice read in one pass; nil for anything the reader is not sure of.
    public init?(fastJSON bytes: UnsafeBufferPointer<UInt8>) {
        var reader = StrictJSONReader(bytes: bytes)
        var type: Kind?, devices: [DeviceAddress]?
        var reason: String??, offlineSince: Int64??, tookOver: Bool??
        var seen = SeenKeys()
        let read: Void? = reader.object { reader, name in
            switch name {
            case "type":
                guard seen.first(0) else { return false }
                type = reader.string().flatMap(Kind.init(rawValue:))
                return type != nil
            case "devices":
                guard seen.first(1) else { return false }
                devices = DeviceAddress.readList(&reader)
                return devices != nil
            case "reason":
                guard seen.first(2) else { return false }
                reason = reader.optional { $0.string() }
                return reason != nil
            case "offlineSince":
                guard seen.first(3) else { return false }
                offlineSince = reader.optional { $0.integer() }
                return offlineSince != nil
            case "tookOver":
                guard seen.first(4) else { return false }
                tookOver = reader.optional { $0.boolean() }
                return tookOver != nil
            default:
                return reader.skipScalar()
            }
        }
        reader.skipSpace()
        guard read != nil, reader.atEnd, let type, let devices else { return nil }
        self.init(type: type, devices: devices, reason: reason ?? nil, offlineSince: offlineSince ?? nil, tookOver: tookOver ?? nil)
    }
}

extension GatewayCommand {
    /// A command read in one pass; nil for anything the reader is not sure of.
    public init?(fastJSON bytes: UnsafeBufferPointer<UInt8>) {
        var reader = StrictJSONReader(bytes: bytes)
        var op: Operation?, devices: [DeviceAddress]??, pushes: [UInt64]??
        var seen = SeenKeys()
        let read: Void? = reader.object { reader, name in
            switch name {
            case "op":
                guard seen.first(0) else { return false }
                op = reader.string().flatMap(Operation.init(rawValue:))
                return op != nil
            case "devices":
                guard seen.first(1) else { return false }
                devices = reader.optional(DeviceAddress.readList)
                return devices != nil
            case "pushes":
                guard seen.first(2) else { return false }
                pushes = reader.optional { $0.elements { $0.unsigned() } }
                return pushes != nil
            default:
                return reader.skipScalar()
            }
        }
        reader.skipSpace()
        guard read != nil, reader.atEnd, let op else { return nil }
        self.init(op: op, devices: devices ?? nil, pushes: pushes ?? nil)
    }
}

extension GatewayNotice {
    /// The notice as JSON text that `JSONDecoder` reads back to it (members in declaration
    /// order, absent optionals left out, slashes unescaped), in one pass.
    public var encodedJSON: String {
        var out = "{\"type\":"
        out.reserveCapacity(40 + devices.count * 64 + (reason?.utf8.count ?? 0))
        JSONText.appendQuoted(type.rawValue, to: &out)
        out += ",\"devices\":"
        DeviceAddress.append(devices, to: &out)
        if let reason {
            out += ",\"reason\":"
            JSONText.appendQuoted(reason, to: &out)
        }
        if let offlineSince { out += ",\"offlineSince\":" + String(offlineSince) }
        if let tookOver { out += tookOver ? ",\"tookOver\":true" : ",\"tookOver\":false" }
        return out + "}"
    }
}
