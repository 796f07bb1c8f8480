import Foundation
import PropertyBased
import PushFleetCore
import PushFleetServerSupport
import Testing

@Suite("A JSON string body read from its bytes")
struct PlainJSONStringTests {
    static func read(_ text: some Sequence<UInt8>) -> String? {
        Array(text).withUnsafeBytes(PlainJSONString.read)
    }

    @Test(arguments: [
        ("\"hello\"", "hello"), ("  \"x\"\r\n", "x"), ("\"\"", ""), ("\t\"é ☃ 🚀\" ", "é ☃ 🚀"), ("\"a/b\u{7F}\"", "a/b\u{7F}"),
    ])
    func readsStringsWithoutEscapes(_ text: String, _ expected: String) {
        #expect(Self.read(text.utf8) == expected)
    }

    /// Everything else is left to JSONDecoder: escapes, other values, stray bytes, bad UTF-8.
    @Test(arguments: [
        "\"a\\\"b\"", "\"a\\nb\"", "\"\\u00e9\"", "\"a\"b\"", "\"tab\there\"", "\"", "", "  ", "\"a\" \"b\"", "42", "null", "{\"a\":1}",
        "[\"a\"]", "\"a\"x", "x\"a\"", "\u{FEFF}\"a\"",
    ])
    func leavesOtherTextToTheDecoder(_ text: String) {
        #expect(Self.read(text.utf8) == nil)
    }

    @Test func refusesInvalidUTF8() {
        #expect(Self.read([0x22, 0xFF, 0x22]) == nil)
        #expect(Self.read([0x22, 0xED, 0xA0, 0x80, 0x22]) == nil, "an encoded surrogate is not UTF-8")
        #expect(Self.read([0x22, 0xC3, 0x22]) == nil, "a sequence cut short")
    }

    /// Whenever it answers, JSONDecoder gives the same string; half the inputs are strings it
    /// must answer, so the check is not vacuous.
    @Test func agreesWithJSONDecoder() async {
        let plain: [[UInt8]] = [[0x61], [0x20], [0x7F], [0x2F], [0x75], Array("é".utf8), Array("🚀".utf8)]
        let hostile: [[UInt8]] = plain + [[0x22], [0x22], [0x5C], [0x0A], [0x09], [0x01], [0xFF], [0xC3], [0xED, 0xA0, 0x80], [0x7B]]
        await propertyCheck(count: 4000, input: Gen.uint64()) { seed in
            var rng = SplitMix64(seed: seed)
            let mustAnswer = rng.next() % 2 == 0
            let alphabet = mustAnswer ? plain : hostile
            var bytes: [UInt8] = mustAnswer || rng.next() % 2 == 0 ? [0x22] : []
            for _ in 0..<(rng.next() % 10) { bytes += alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            if mustAnswer || rng.next() % 2 == 0 { bytes.append(0x22) }
            let decoded = try? JSONDecoder().decode(String.self, from: Data(bytes))
            let fast = Self.read(bytes)
            if mustAnswer { #expect(fast != nil, "bytes \(bytes)") }
            if let fast { #expect(decoded == fast, "bytes \(bytes)") }
        }
    }

    /// What JSONEncoder writes for text needing no escape is read back whole.
    @Test func readsWhatJSONEncoderWrites() throws {
        for text in ["", "secure payload 42", "é☃🚀", String(repeating: "x", count: 5000)] {
            let encoded = try JSONEncoder().encode(text)
            #expect(encoded.withUnsafeBytes(PlainJSONString.read) == text)
        }
    }
}
