import Foundation
import PushFleetClients
import PushFleetWire
import Testing

@Suite("Gateway frames, decoded")
struct GatewayInboundTests {
    static func text(_ value: some Encodable) throws -> String {
        String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
    }

    @Test("pushes, refusals and notices as the gateway writes them, each decoded as what its type says")
    func typeFirst() throws {
        var push = PushFrame(platform: .apns, token: "t1", id: "i", acceptedAt: 5, pushType: "alert", body: #"{"type":"subscribed","aps":{}}"#)
        push.push = 9
        let pushText = try Self.text(push)
        #expect(GatewayInbound.declaredType(pushText) == "push", "the body's own \"type\" is escaped and not taken")
        guard case .push(let decoded) = GatewayInbound(pushText) else { Issue.record("not a push"); return }
        #expect(decoded == push)

        var refused = push
        refused.type = PushFrame.refusedType
        refused.reason = "Unregistered"
        guard case .push(let refusal) = GatewayInbound(try Self.text(refused)) else { Issue.record("not a refusal"); return }
        #expect(refusal.type == PushFrame.refusedType && refusal.reason == "Unregistered")

        let notice = GatewayNotice(type: .subscribed, devices: [DeviceAddress(platform: .fcm, token: "t2")])
        guard case .notice(let got) = GatewayInbound(try Self.text(notice)) else { Issue.record("not a notice"); return }
        #expect(got == notice)
    }

    @Test("frames in another member order, or broken ones, are still told apart; nothing is a crash")
    func otherwise() {
        let reordered = #"{"token":"t","platform":"apns","id":"i","acceptedAt":1,"pushType":"alert","body":"b","stored":false,"type":"push"}"#
        guard case .push(let push) = GatewayInbound(reordered) else { Issue.record("reordered push"); return }
        #expect(push.token == "t")
        guard case .notice = GatewayInbound(#"{"devices":[],"type":"subscribed"}"#) else { Issue.record("reordered notice"); return }
        for broken in [#"{"type":"push"}"#, #"{"type":"subscribed""#, #"{"type":"nonsense"}"#, #"{"type":"pu\"sh"}"#, "", "[]", #"{"type":""#] {
            guard case .garbage = GatewayInbound(broken) else {
                Issue.record("\(broken) was not garbage")
                continue
            }
        }
        #expect(GatewayInbound.declaredType(#"{"devices":[],"type":"subscribed"}"#) == "subscribed")
        #expect(GatewayInbound.declaredType(#"{"type" : "push"}"#) == nil)
        // A push whose first "type" is a nested one still decodes as the push it is.
        let mislabelled = #"{"x":{"type":"subscribed"},"token":"t","platform":"apns","id":"i","acceptedAt":1,"pushType":"alert","body":"b","stored":false,"type":"push"}"#
        guard case .push = GatewayInbound(mislabelled) else { Issue.record("mislabelled push"); return }
    }
}
