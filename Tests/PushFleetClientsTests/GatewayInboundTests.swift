import Foundation
import PushFleetClients
import PushFleetWire
import PushFleetCore
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

/// The one-pass push decoder against `JSONDecoder`, over frames as the gateway writes them and
/// over frames bent every way a foreign gateway or a broken one might.
@Suite("Push frames, the fast decoder")
struct PushFrameFastDecodingTests {
    /// What a frame decodes to, comparable.
    static func outcome(_ inbound: GatewayInbound) -> String {
        switch inbound {
        case .push(let frame): "push \(frame)"
        case .notice(let notice): "notice \(notice)"
        case .garbage: "garbage"
        }
    }

    static func randomString(_ rng: inout SplitMix64) -> String {
        let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{1F}", "é", "漢", "🚀", "\u{7F}", "{", "}", ":", ","]
        return (0..<Int(rng.next() % 12)).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined()
    }

    static func randomFrame(_ rng: inout SplitMix64) -> PushFrame {
        var frame = PushFrame(
            platform: Platform.allCases[Int(rng.next() % UInt64(Platform.allCases.count))], token: randomString(&rng), id: randomString(&rng),
            acceptedAt: Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64), pushType: randomString(&rng),
            body: #"{"aps":{"alert":"\#(randomString(&rng))"},"pf":"pf:run:\#(rng.next() % 1000)"}"#,
            bodyEncoding: rng.next() % 3 == 0 ? "base64" : nil, stored: rng.next() % 2 == 0
        )
        if rng.next() % 4 == 0 { frame.type = PushFrame.refusedType }
        if rng.next() % 2 == 0 { frame.reason = randomString(&rng) }
        if rng.next() % 2 == 0 { frame.push = rng.next() }
        if rng.next() % 2 == 0 { frame.writtenAt = Int64(bitPattern: rng.next()) }
        if rng.next() % 3 == 0 { frame.hubAt = Int64(rng.next() % 1_000_000) }
        if rng.next() % 3 == 0 { frame.delay = -Int64(rng.next() % 1_000) }
        if rng.next() % 5 == 0 { frame.webPush = WebPushHeaders(contentEncoding: "aes128gcm", ttl: 60) }
        if rng.next() % 3 == 0 { frame.trace = TraceIdentity.send(run: randomString(&rng), id: Int(rng.next() % 1000)).traceparent }
        return frame
    }

    /// A frame's text bent one way: spaces, keys it does not know, a repeated key, numbers
    /// JSON spells otherwise, nulls, escapes, a wrong type, a cut, a stray byte.
    static func bend(_ text: String, _ rng: inout SplitMix64) -> String {
        JSONBend.bend(text, &rng, [
            .spaced,
            .replace("{", #"{"extra":"x\"y","n":-12,"b":true,"z":null,"#),
            .replace("{", #"{"nested":{"type":"subscribed"},"#),
            .replace("{", #"{"list":[1,2],"#),
            .replace("{", #"{"token":"dup","#),
            .replace(#""acceptedAt":"#, #""acceptedAt":1.5e3,"x":"#),
            .replace(#""stored":"#, #""stored":null,"x":"#),
            .replace(#""platform":""#, #""platform":"\u0061"#),
            .replace(#""id":"#, #""id":12,"x":"#),
            .cut,
            .strayByte,
            .replace(#""acceptedAt":"#, #""acceptedAt":007,"x":"#),
            .replace(#""acceptedAt":"#, #""acceptedAt":99999999999999999999,"x":"#),
            .replace(#""token":""#, #""token":"\ud83d\ude80\ud800"#),
        ])
    }

    @Test("a frame as the gateway writes it is read by the fast decoder, and to the same frame")
    func plainFrames() throws {
        var rng = SplitMix64(seed: 0xF4A5)
        var fast = 0
        for _ in 0..<2_000 {
            let frame = Self.randomFrame(&rng)
            var text = String(decoding: try JSONEncoder().encode(frame), as: UTF8.self)
            let read = text.withUTF8 { PushFrame(fastJSON: $0) }
            if frame.webPush == nil {
                #expect(read == frame, "\(text)")
                if read != nil { fast += 1 }
            } else {
                #expect(read == nil, "Web Push headers are JSONDecoder's")
            }
            #expect(Self.outcome(GatewayInbound(text)) == Self.outcome(GatewayInbound(decoding: text)))
        }
        #expect(fast > 1_000)
    }

    @Test("a frame written in one pass decodes to the same frame, by JSONDecoder and by the fast decoder, as JSONEncoder's does")
    func fastEncoding() throws {
        var rng = SplitMix64(seed: 0xE1C0)
        for _ in 0..<2_000 {
            var frame = Self.randomFrame(&rng)
            if rng.next() % 3 == 0 {
                frame.webPush = WebPushHeaders(
                    contentEncoding: rng.next() % 2 == 0 ? nil : "aesgcm", encryption: rng.next() % 2 == 0 ? nil : Self.randomString(&rng),
                    cryptoKey: Self.randomString(&rng), urgency: rng.next() % 2 == 0 ? nil : "high", topic: nil, ttl: Int64(rng.next() % 100)
                )
            }
            if rng.next() % 4 == 0 { frame.collapseKey = Self.randomString(&rng) }
            var text = frame.encodedJSON
            #expect(try JSONDecoder().decode(PushFrame.self, from: Data(text.utf8)) == frame, "\(text)")
            let read = text.withUTF8 { PushFrame(fastJSON: $0) }
            // The fast decoder takes every frame without Web Push headers, as it takes JSONEncoder's.
            #expect(frame.webPush != nil ? read == nil : read == frame, "\(text)")
            let written = String(decoding: try JSONEncoder().encode(frame), as: UTF8.self)
            #expect(Self.outcome(GatewayInbound(text)) == Self.outcome(GatewayInbound(decoding: written)))
        }
    }

    @Test("a send's outcome written in one pass is byte for byte what the backend's JSON encoder writes")
    func sendOutcomeEncoding() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var rng = SplitMix64(seed: 0x5E4D)
        let states: [SendOutcome.State] = [.completed, .noTargetFound, .abandoned, .enqueued]
        for _ in 0..<500 {
            let outcome = SendOutcome(
                outcome: states[Int(rng.next() % 4)], targets: Int(rng.next() % 10), accepted: Int(rng.next() % 10),
                failed: Int(rng.next() % 3), removed: Int(rng.next() % 3), id: rng.next() % 2 == 0 ? nil : UUIDText.random().lowercased()
            )
            #expect(outcome.encodedJSON == String(decoding: try encoder.encode(outcome), as: UTF8.self))
        }
    }

    @Test("a secure notification written in one pass is byte for byte what the backend's JSON encoder writes")
    func secureNotificationEncoding() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var rng = SplitMix64(seed: 0x5EC0)
        for _ in 0..<2_000 {
            let notification = SecureNotification(id: Self.randomString(&rng), payload: Self.randomString(&rng), read: rng.next() % 2 == 0)
            let text = notification.encodedJSON
            #expect(try JSONDecoder().decode(SecureNotification.self, from: Data(text.utf8)) == notification, "\(text)")
            #expect(text == String(decoding: try encoder.encode(notification), as: UTF8.self))
        }
    }

    @Test("a bent frame decodes to what JSONDecoder makes of it, whichever way it goes")
    func bentFrames() throws {
        var rng = SplitMix64(seed: 0xB3E7)
        var kinds = Set<String>()
        for _ in 0..<6_000 {
            let text = Self.bend(String(decoding: try JSONEncoder().encode(Self.randomFrame(&rng)), as: UTF8.self), &rng)
            let outcome = Self.outcome(GatewayInbound(text))
            #expect(outcome == Self.outcome(GatewayInbound(decoding: text)), "\(text)")
            kinds.insert(String(outcome.prefix(4)))
        }
        #expect(kinds == ["push", "garb"], "both pushes and garbage were made")
    }
}
