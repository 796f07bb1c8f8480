import Foundation
import PushFleetCore
import Testing

/// The push service's reports read in one pass must be what `JSONDecoder` reads, or nothing (for
/// it to read).
@Suite("Push reports read without JSONDecoder")
struct PushReportFastDecodingTests {
    static func randomString(_ rng: inout SplitMix64) -> String {
        let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "é", "漢", "🚀", "\u{7F}", "{", "}", ":", ",", "pf:run:"]
        return (0..<Int(rng.next() % 12)).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined()
    }

    static func randomHop(_ rng: inout SplitMix64) -> PushHop {
        var hop = PushHop(
            push: rng.next() >> (rng.next() % 64), step: PushHop.Step.allCases[Int(rng.next() % UInt64(PushHop.Step.allCases.count))],
            at: Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64), platform: ["apns", "fcm", "wns", "webpush"][Int(rng.next() % 4)],
            token: randomString(&rng)
        )
        if rng.next() % 2 == 0 {
            hop.pushType = randomString(&rng)
            hop.body = #"{"aps":{"alert":"\#(randomString(&rng))"}}"#
        }
        if rng.next() % 4 == 0 { hop.base64 = rng.next() % 2 == 0 }
        if rng.next() % 4 == 0 { hop.hubAt = Int64(rng.next() % 1_000_000_000) }
        if rng.next() % 4 == 0 {
            hop.status = Int(rng.next() % 600)
            hop.reason = randomString(&rng)
        }
        if rng.next() % 4 == 0 { hop.delay = Int64(rng.next() % 1_000_000) }
        if rng.next() % 3 == 0 { hop.then = Int64(bitPattern: rng.next()) }
        if rng.next() % 4 == 0 { hop.trace = TraceIdentity.send(run: randomString(&rng), id: Int(rng.next() % 1000)).traceparent }
        return hop
    }

    static func randomReport(_ rng: inout SplitMix64) -> PushReport {
        var report = PushReport(hops: (0..<Int(rng.next() % 5)).map { _ in randomHop(&rng) })
        if rng.next() % 4 == 0 { report.lost = Int(rng.next() % 10_000) }
        if rng.next() % 10 == 0 { report.hub = [HubNote(at: 1, body: randomString(&rng), format: "apple", targets: 2)] }
        return report
    }

    static func decoded(_ text: String) -> PushReport? {
        try? JSONDecoder().decode(PushReport.self, from: Data(text.utf8))
    }

    /// What a reader makes of the text: the fast reader, then JSONDecoder where it gave up.
    static func read(_ text: String) -> PushReport? {
        var text = text
        return text.withUTF8 { PushReport(fastJSON: $0) } ?? decoded(text)
    }

    @Test("a report as the push service writes it is read by the fast reader, and to the same report")
    func plainReports() throws {
        var rng = SplitMix64(seed: 0x5E9)
        var fast = 0
        for _ in 0..<2_000 {
            let report = Self.randomReport(&rng)
            var text = String(decoding: try JSONEncoder().encode(report), as: UTF8.self)
            let read = text.withUTF8 { PushReport(fastJSON: $0) }
            if report.hub == nil {
                #expect(read == report, "\(text)")
                if read != nil { fast += 1 }
            } else {
                #expect(read == nil, "hub notes are JSONDecoder's")
            }
        }
        #expect(fast > 1_500)
    }

    @Test("a bent report reads as JSONDecoder reads it, whichever way it goes")
    func bentReports() throws {
        var rng = SplitMix64(seed: 0x7A11)
        var both = (read: 0, refused: 0)
        for _ in 0..<6_000 {
            var text = String(decoding: try JSONEncoder().encode(Self.randomReport(&rng)), as: UTF8.self)
            func replaceFirst(_ pattern: String, with replacement: String) {
                if let range = text.range(of: pattern) { text.replaceSubrange(range, with: replacement) }
            }
            switch rng.next() % 16 {
            case 0: text = text.replacingOccurrences(of: ",", with: " ,\n\t").replacingOccurrences(of: ":", with: " : ")
            case 1: replaceFirst(#"{"push""#, with: #"{"extra":"x\"y","n":-12,"b":true,"z":null,"push""#)
            case 2: replaceFirst(#"{"push""#, with: #"{"nested":{"a":1},"push""#)
            case 3: replaceFirst(#"{"push""#, with: #"{"token":"dup","push""#)
            case 4: replaceFirst(#""at":"#, with: #""at":1.5e3,"x":"#)
            case 5: replaceFirst(#""at":"#, with: #""at":007,"x":"#)
            case 6: replaceFirst(#""push":"#, with: #""push":-1,"x":"#)
            case 7: replaceFirst(#""push":"#, with: #""push":99999999999999999999,"x":"#)
            case 8: replaceFirst(#""step":""#, with: #""step":"nonsense","x":""#)
            case 9: replaceFirst(#""platform":""#, with: #""platform":"\u0061"#)
            case 10: replaceFirst(#""token":""#, with: #""token":"\ud83d\ude80\ud800"#)
            case 11: text = String(text.prefix(Int(rng.next() % UInt64(max(1, text.count)))))
            case 12:
                var bytes = Array(text.utf8)
                if !bytes.isEmpty { bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(rng.next() % 128) }
                text = String(decoding: bytes, as: UTF8.self)
            case 13: replaceFirst("{", with: #"{"hub":null,"lost":null,"#)
            case 14: replaceFirst("{", with: #"{"hops":[],"#)
            default: replaceFirst(#""at":"#, with: #""at":null,"x":"#)
            }
            let read = Self.read(text)
            #expect(read == Self.decoded(text), "\(text)")
            if read == nil { both.refused += 1 } else { both.read += 1 }
        }
        #expect(both.read > 1_000 && both.refused > 1_000, "both reports and refusals were made")
    }

    @Test("a report belongs to the runs whose id its token or a nonce in its body carries, as a search of the text finds")
    func belongsToRun() {
        let run = "r7f3a9c"
        func hop(token: String, body: String? = nil) -> PushHop {
            PushHop(push: 1, step: .accepted, at: 0, platform: "apns", token: token, body: body)
        }
        #expect(hop(token: "pf-\(run)-0001").belongs(toRun: run))
        #expect(hop(token: "0A1B", body: #"{"pf":"pf:\#(run):12"}"#).belongs(toRun: run))
        #expect(!hop(token: "0A1B", body: #"{"pf":"pf:\#(run)"}"#).belongs(toRun: run))
        #expect(!hop(token: "r7f3a9", body: nil).belongs(toRun: run))
        #expect(!hop(token: "pf-\(run)").belongs(toRun: ""))
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("abc:-")
        func text(_ count: Int) -> String { String((0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] }) }
        for _ in 0..<5_000 {
            let (token, body, id) = (text(Int.random(in: 0...12, using: &rng)), text(Int.random(in: 0...16, using: &rng)), text(Int.random(in: 1...3, using: &rng)))
            let expected = token.contains(id) || body.contains("pf:" + id + ":")
            #expect(hop(token: token, body: body).belongs(toRun: id) == expected, "\(token) \(body) \(id)")
        }
    }
}
