import Foundation
package import PushFleetWire

/// Push frames are small; anything larger than this from the gateway is refused.
package let maxGatewayFrame = 1 << 20

/// Decodes a gateway text frame into a push, or a notice.
package enum GatewayInbound: Sendable {
    case push(PushFrame)
    case notice(GatewayNotice)
    case garbage

    /// The frame's `type` says which it is, so a push is decoded as a push and a notice as a
    /// notice, with no failed decode in between (a thrown decoding error costs more than the
    /// decode); the other is tried only if the first does not fit. Both are read in one pass
    /// first: a notice's `type` is never a push's, so no text reads as both.
    package init(_ text: String) {
        var text = text
        if let frame = text.withUTF8({ PushFrame(fastJSON: $0) }), frame.type == "push" || frame.type == PushFrame.refusedType {
            self = .push(frame)
            return
        }
        if let notice = text.withUTF8({ GatewayNotice(fastJSON: $0) }) {
            self = .notice(notice)
            return
        }
        self.init(decoding: text)
    }

    /// The same, all through `JSONDecoder` (what the fast path must agree with).
    package init(decoding text: String) {
        let data = Data(text.utf8)
        let decoder = JSONDecoder()
        func push() -> PushFrame? {
            guard let frame = try? decoder.decode(PushFrame.self, from: data), frame.type == "push" || frame.type == PushFrame.refusedType else {
                return nil
            }
            return frame
        }
        func notice() -> GatewayNotice? { try? decoder.decode(GatewayNotice.self, from: data) }
        let pushFirst = Self.declaredType(text).map { $0 == "push" || $0 == PushFrame.refusedType } ?? true
        if pushFirst {
            if let frame = push() { self = .push(frame) } else if let notice = notice() { self = .notice(notice) } else { self = .garbage }
        } else {
            if let notice = notice() { self = .notice(notice) } else if let frame = push() { self = .push(frame) } else { self = .garbage }
        }
    }

    private static let typeKey = Array(#""type":""#.utf8)

    /// The value of the first `"type":"…"` in the frame (at most 32 bytes, no escapes), a hint
    /// only: in a frame's string values every quote is escaped, so the first is the frame's own.
    package static func declaredType(_ text: String) -> String? {
        var bytes = Substring(text).utf8
        while let start = bytes.firstIndex(of: typeKey[0]) {
            let rest = bytes[start...]
            if rest.starts(with: typeKey) {
                let value = rest.dropFirst(typeKey.count).prefix(33)
                guard let end = value.firstIndex(of: UInt8(ascii: "\"")), !value[..<end].contains(UInt8(ascii: "\\")) else { return nil }
                return String(decoding: value[..<end], as: UTF8.self)
            }
            bytes = bytes[bytes.index(after: start)...]
        }
        return nil
    }
}
