import Foundation
import PushFleetCore
import Testing

/// The push service's reports written without JSONEncoder must read back as the same report,
/// by JSONDecoder and by the fast reader alike.
@Suite("Push reports written without JSONEncoder")
struct PushReportFastEncodingTests {
    @Test("a written report reads back equal with JSONDecoder, and with the fast reader when it has no hub notes")
    func roundTrips() throws {
        var rng = SplitMix64(seed: 0xE4C0)
        var fast = 0
        for _ in 0..<3_000 {
            let report = PushReportFastDecodingTests.randomReport(&rng)
            var text = report.json
            #expect(try JSONDecoder().decode(PushReport.self, from: Data(text.utf8)) == report, "\(text)")
            let read = text.withUTF8 { PushReport(fastJSON: $0) }
            if report.hub == nil {
                #expect(read == report, "\(text)")
                fast += 1
            }
        }
        #expect(fast > 2_000)
    }

    @Test("members left out are the nil ones, as JSONEncoder leaves them out")
    func sameMembersAsJSONEncoder() throws {
        var rng = SplitMix64(seed: 0x0B5E)
        for _ in 0..<500 {
            let report = PushReportFastDecodingTests.randomReport(&rng)
            func members(_ text: String) throws -> [[String]] {
                let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
                let hops = object["hops"] as? [[String: Any]] ?? []
                return [object.keys.sorted()] + hops.map { $0.keys.sorted() }
            }
            let theirs = String(decoding: try JSONEncoder().encode(report), as: UTF8.self)
            #expect(try members(report.json) == members(theirs), "\(report.json)")
        }
    }

    @Test("strings escaped byte by byte read back as themselves and are escaped as the character-wise rules escape them")
    func escapedStrings() throws {
        var rng = SplitMix64(seed: 0x35CA)
        let pool: [Unicode.Scalar] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{0}", "\u{1}", "\u{1F}", "\u{7F}", "é", "\u{2028}", "日", "😀", "{", ":"]
        /// The rules as first written, one scalar at a time.
        func reference(_ text: String) -> String {
            var out = ""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case _ where scalar.value < 0x20:
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out
        }
        for _ in 0..<2_000 {
            var text = ""
            for _ in 0..<Int(rng.next() % 40) { text.unicodeScalars.append(pool[Int(rng.next() % UInt64(pool.count))]) }
            let escaped = JSONText.escape(text)
            #expect(escaped == reference(text), "\(text.debugDescription)")
            #expect(try JSONDecoder().decode(String.self, from: Data(JSONText.quoted(text).utf8)) == text, "\(text.debugDescription)")
            var bytes = JSONBytes(capacity: 0)
            bytes.raw("[")
            bytes.quoted(text)
            #expect(bytes.text == "[" + JSONText.quoted(text), "\(text.debugDescription)")
        }
    }

    @Test("integers are written in bytes as String writes them, at the edges of their range too")
    func integersInBytes() {
        var rng = SplitMix64(seed: 0x1D16)
        var signed: [Int64] = [0, 1, -1, 9, 10, -10, 99, 100, .max, .min, .max - 1, .min + 1]
        var unsigned: [UInt64] = [0, 9, 10, .max, .max - 1, UInt64(Int64.max) + 1]
        for _ in 0..<1_000 {
            signed.append(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64))
            unsigned.append(rng.next() >> (rng.next() % 64))
        }
        for value in signed {
            var bytes = JSONBytes(capacity: 0)
            bytes.integer(value)
            #expect(bytes.text == String(value))
        }
        for value in unsigned {
            var bytes = JSONBytes(capacity: 0)
            bytes.integer(value)
            bytes.raw(",")
            bytes.bool(value % 2 == 0)
            #expect(bytes.text == String(value) + "," + String(value % 2 == 0))
        }
    }
}
