import Foundation
import PushFleetClients
import PushFleetCore
import PushFleetWire
import Testing

/// The gateway's commands and notices in one pass, against Foundation's coders: the same text
/// out, the same value in, and for any text bent from them the fast reader answers what
/// `JSONDecoder` answers or leaves it to it.
@Suite("Gateway commands and notices, the one-pass coders")
struct GatewayFramesFastJSONTests {
    static func randomDevices(_ rng: inout SplitMix64) -> [DeviceAddress] {
        (0..<Int(rng.next() % 5)).map { _ in
            DeviceAddress(platform: Platform.allCases[Int(rng.next() % UInt64(Platform.allCases.count))], token: PushFrameFastDecodingTests.randomString(&rng))
        }
    }

    static func randomNotice(_ rng: inout SplitMix64) -> GatewayNotice {
        let kinds: [GatewayNotice.Kind] = [.subscribed, .unsubscribed, .disconnected, .unregistered, .error]
        return GatewayNotice(
            type: kinds[Int(rng.next() % 5)], devices: randomDevices(&rng),
            reason: rng.next() % 2 == 0 ? nil : PushFrameFastDecodingTests.randomString(&rng) + "/x",
            offlineSince: rng.next() % 3 == 0 ? Int64(bitPattern: rng.next()) : nil, tookOver: rng.next() % 3 == 0 ? rng.next() % 2 == 0 : nil
        )
    }

    static func randomCommand(_ rng: inout SplitMix64) -> GatewayCommand {
        let ops: [GatewayCommand.Operation] = [.subscribe, .unsubscribe, .unregister, .ack]
        return GatewayCommand(
            op: ops[Int(rng.next() % 4)], devices: rng.next() % 4 == 0 ? nil : randomDevices(&rng),
            pushes: rng.next() % 3 == 0 ? (0..<Int(rng.next() % 4)).map { _ in rng.next() } : nil
        )
    }

    /// What a text decodes to by the fast reader, or by `JSONDecoder` when it leaves it.
    static func both<T: Decodable & Equatable>(_ text: String, _ type: T.Type, fast: (UnsafeBufferPointer<UInt8>) -> T?) -> (fast: T?, decoder: T?) {
        var copy = text
        return (copy.withUTF8(fast), try? JSONDecoder().decode(T.self, from: Data(text.utf8)))
    }

    /// A text bent one way: spaces, members it does not know, a repeated member, nulls, numbers
    /// spelled otherwise, escapes, a cut, a stray byte.
    static func bend(_ text: String, _ rng: inout SplitMix64) -> String {
        JSONBend.bend(text, &rng, [
            .spaced,
            .replace("{", #"{"extra":"x\"y","n":-12,"b":true,"z":null,"#),
            .replace("{", #"{"nested":{"a":1},"#),
            .replace("{", #"{"devices":[],"#),
            .replace(#""devices":"#, #""devices":null,"x":"#),
            .replace(#""platform":""#, #""platform":"\u0061"#),
            .replace(#""token":"#, #""token":12,"x":"#),
            .cut,
            .strayByte,
            .replace(#""pushes":["#, #""pushes":[1.5e3,"#),
            .replace(#""offlineSince":"#, #""offlineSince":007,"x":"#),
            .replace("{\"platform\"", #"{"kind":{"deep":[1]},"platform""#),
        ])
    }

    @Test("a notice written in one pass, and the push service's JSONEncoder's, read back to itself by both readers")
    func notices() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        var rng = SplitMix64(seed: 0x6A7E)
        for _ in 0..<2_000 {
            let notice = Self.randomNotice(&rng)
            let text = notice.encodedJSON
            // JSONEncoder's member order is its own (not the declaration's), so the texts are
            // compared by what they read back to.
            let written = String(decoding: try encoder.encode(notice), as: UTF8.self)
            for text in [text, written] {
                let read = Self.both(text, GatewayNotice.self) { GatewayNotice(fastJSON: $0) }
                #expect(read.fast == notice && read.decoder == notice, "\(text)")
            }
            guard case .notice(let inbound) = GatewayInbound(text) else {
                Issue.record("\(text) was not a notice")
                continue
            }
            #expect(inbound == notice)
        }
    }

    @Test("a command written in one pass is read back to itself by JSONDecoder and by the fast reader, as JSONEncoder's is")
    func commands() throws {
        var rng = SplitMix64(seed: 0xC0DE)
        for _ in 0..<2_000 {
            let command = Self.randomCommand(&rng)
            for text in [command.encodedJSON, String(decoding: try JSONEncoder().encode(command), as: UTF8.self)] {
                let read = Self.both(text, GatewayCommand.self) { GatewayCommand(fastJSON: $0) }
                #expect(read.fast == command && read.decoder == command, "\(text)")
            }
        }
    }

    @Test("a bent notice or command: the fast reader answers what JSONDecoder answers, or leaves it to it; never another value")
    func bent() throws {
        var rng = SplitMix64(seed: 0xBE27)
        var fastNotices = 0, fastCommands = 0, refused = 0
        for _ in 0..<4_000 {
            let notice = Self.bend(Self.randomNotice(&rng).encodedJSON, &rng)
            let n = Self.both(notice, GatewayNotice.self) { GatewayNotice(fastJSON: $0) }
            #expect(n.fast == nil || n.fast == n.decoder, "\(notice)")
            if n.fast != nil { fastNotices += 1 }
            if n.decoder == nil { refused += 1 }
            let command = Self.bend(Self.randomCommand(&rng).encodedJSON, &rng)
            let c = Self.both(command, GatewayCommand.self) { GatewayCommand(fastJSON: $0) }
            #expect(c.fast == nil || c.fast == c.decoder, "\(command)")
            if c.fast != nil { fastCommands += 1 }
        }
        #expect(fastNotices > 1_000 && fastCommands > 1_000 && refused > 100, "\(fastNotices) \(fastCommands) \(refused)")
    }
}
