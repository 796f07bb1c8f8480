import Foundation
package import PushFleetWire

/// Push frames are small; anything larger than this from the gateway is refused.
package let maxGatewayFrame = 1 << 20

/// Decodes a gateway text frame into a push, or a notice.
package enum GatewayInbound: Sendable {
    case push(PushFrame)
    case notice(GatewayNotice)
    case garbage

    /// Pushes, the hot case, take one decode; notices do not have a push's fields and fall through.
    package init(_ text: String) {
        let data = Data(text.utf8)
        if let frame = try? JSONDecoder().decode(PushFrame.self, from: data), frame.type == "push" || frame.type == PushFrame.refusedType {
            self = .push(frame)
        } else if let notice = try? JSONDecoder().decode(GatewayNotice.self, from: data) {
            self = .notice(notice)
        } else {
            self = .garbage
        }
    }
}
