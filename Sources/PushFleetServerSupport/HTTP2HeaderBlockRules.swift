package import NIOHPACK

/// Whether a request's header block, or a trailer block, is well-formed HTTP/2 (RFC 9113 §8.2,
/// §8.3): the rules NIO's HTTP/2 handler applies when its own header validation is on, which the
/// push service turns off (``HTTP2RoutesChannel``). NIO's validator made a `Substring` and
/// compared names as strings for every field of every request and of every answer the service
/// itself wrote: a tenth of an h2c provider request's CPU. These rules read the bytes once, and
/// only what clients send. A malformed block is a stream error (``HTTP2FrameRoutes`` resets it).
package enum HTTP2HeaderBlockRules {
    /// The request's first header block.
    package static func isValidRequest(_ block: HPACKHeaders) -> Bool {
        validate(block, trailers: false)
    }

    /// A block after the request's first: trailers, which carry no pseudo-header.
    package static func isValidTrailers(_ block: HPACKHeaders) -> Bool {
        validate(block, trailers: true)
    }

    private struct Pseudo: OptionSet {
        var rawValue: UInt8
        static let path = Pseudo(rawValue: 1)
        static let method = Pseudo(rawValue: 2)
        static let scheme = Pseudo(rawValue: 4)
        static let authority = Pseudo(rawValue: 8)
        static let other = Pseudo(rawValue: 16)
    }

    private static func validate(_ block: HPACKHeaders, trailers: Bool) -> Bool {
        var seen: Pseudo = []
        var regular = false
        var connect = false
        for (name, value, _) in block {
            var name = name
            var value = value
            let field = name.withUTF8 { name in value.withUTF8 { value in check(name: name, value: value, trailers: trailers) } }
            switch field {
            case .invalid:
                return false
            case .regular:
                regular = true
            case .pseudo(let kind, let isConnect):
                // Pseudo-headers come first, once each; a trailer block has none.
                guard !regular, !trailers, kind != .other, !seen.contains(kind) else { return false }
                seen.insert(kind)
                if isConnect { connect = true }
            }
        }
        if trailers { return true }
        // CONNECT (RFC 9113 §8.5, without RFC 8441's :protocol, which the server does not offer)
        // names only its authority; every other request its method, scheme and path.
        return connect ? seen == [.method, .authority] : seen.isSuperset(of: [.method, .scheme, .path])
    }

    private enum Field {
        case invalid
        case regular
        case pseudo(Pseudo, isConnect: Bool)
    }

    private static func check(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailers: Bool) -> Field {
        let isPseudo = name.first == UInt8(ascii: ":")
        let base = isPseudo ? UnsafeBufferPointer(rebasing: name.dropFirst()) : name
        guard !base.isEmpty, base.allSatisfy(isNameByte) else { return .invalid }
        if isPseudo {
            // No control byte, space or DEL: a pseudo-header becomes part of a request line.
            guard !value.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { return .invalid }
            if base.elementsEqual(Self.path) { return value.isEmpty ? .invalid : .pseudo(.path, isConnect: false) }
            if base.elementsEqual(Self.method) { return .pseudo(.method, isConnect: value.elementsEqual(Self.connect)) }
            if base.elementsEqual(Self.scheme) { return .pseudo(.scheme, isConnect: false) }
            if base.elementsEqual(Self.authority) { return .pseudo(.authority, isConnect: false) }
            return .pseudo(.other, isConnect: false)
        }
        // Connection-specific fields have no place in HTTP/2 (RFC 9113 §8.2.2).
        if base.count <= 17, Self.connectionSpecific.contains(where: { base.elementsEqual($0) }) { return .invalid }
        if !trailers, base.elementsEqual(Self.te), !value.elementsEqual(Self.trailersValue) { return .invalid }
        guard !value.contains(where: { $0 == 0x00 || $0 == 0x0A || $0 == 0x0D }) else { return .invalid }
        return .regular
    }

    /// A token's bytes, lower case only (RFC 9113 §8.2.1).
    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x21, 0x23...0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x30...0x39, 0x5E...0x7A, 0x7C, 0x7E: true
        default: false
        }
    }

    private static let path = Array("path".utf8)
    private static let method = Array("method".utf8)
    private static let scheme = Array("scheme".utf8)
    private static let authority = Array("authority".utf8)
    private static let connect = Array("CONNECT".utf8)
    private static let te = Array("te".utf8)
    private static let trailersValue = Array("trailers".utf8)
    private static let connectionSpecific = ["connection", "transfer-encoding", "proxy-connection", "keep-alive", "upgrade"].map { Array($0.utf8) }
}
