import Foundation
import PushFleetCore
import Testing

/// UUID text without Foundation, against Foundation.
@Suite("UUID text")
struct UUIDTextTests {
    @Test("minted ids are version-4 UUIDs Foundation reads back, upper case, all different")
    func minted() {
        let ids = (0..<2_000).map { _ in UUIDText.random() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(200) {
            let parsed = UUID(uuidString: id)
            #expect(parsed?.uuidString == id)
            #expect(Array(id)[14] == "4")
            #expect("89AB".contains(Array(id)[19]))
        }
    }

    @Test("unguessable ids, drawn from the system 4 KiB at a time, are version-4 UUIDs in the case asked for, all different across refills")
    func unguessable() {
        let ids = (0..<2_000).map { UUIDText.unguessable(upper: $0 % 2 == 0) }
        #expect(Set(ids.map { $0.lowercased() }).count == ids.count)
        #expect(!ids.contains { $0.lowercased() == "00000000-0000-4000-8000-000000000000" }, "no id from an unfilled buffer")
        for (index, id) in ids.enumerated() {
            #expect(UUID(uuidString: id)?.uuidString == id.uppercased())
            #expect(id == (index % 2 == 0 ? id.uppercased() : id.lowercased()))
            #expect(Array(id)[14] == "4")
            #expect("89abAB".contains(Array(id)[19]))
        }
    }

    /// Foundation's scan also takes a `-` where a digit belongs (sscanf reads it as a sign, so
    /// `-5A32B6B-…` passes); APNs names the canonical form, and so does this check.
    @Test("the check accepts what UUID(uuidString:) accepts in canonical form, and nothing it refuses")
    func validity() {
        var samples = ["", "not-a-uuid", UUID().uuidString, UUID().uuidString.lowercased(), "9a94976b-9408-4465-BC58-32984E26D4B9"]
        samples += ["9A94976B-9408-4465-BC58-32984E26D4B", "9A94976B-9408-4465-BC58-32984E26D4B99", "9A94976B_9408-4465-BC58-32984E26D4B9"]
        samples += ["9A94976B-9408-4465-BC58-32984E26D4BG", "{9A94976B-9408-4465-BC58-32984E26D4B9}", "9A94976B94084465BC5832984E26D4B9"]
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefABCDEFg-")
        for _ in 0..<2_000 {
            samples.append(String((0..<36).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }))
            var valid = Array(UUID().uuidString)
            valid[Int(generator.next() % 36)] = alphabet[Int(generator.next() % UInt64(alphabet.count))]
            samples.append(String(valid))
        }
        for sample in samples {
            let canonical = Array(sample).enumerated().allSatisfy { index, character in
                [8, 13, 18, 23].contains(index) ? character == "-" : character != "-"
            }
            #expect(UUIDText.isValid(sample) == (UUID(uuidString: sample) != nil && canonical), "\(sample)")
        }
    }

    @Test("a body judged a JSON object in one pass is one for JSONSerialization; unsure bodies are left to it")
    func jsonObjects() {
        let bodies = [
            #"{"aps":{"alert":"x"}}"#, #" {"a":[1,2,{"b":null}],"c":true} "#, #"{"a":1.5}"#, #"{"a":"\u00e9"}"#, "{}", "[]", "\"x\"", "1",
            #"{"a":1"#, #"{"a":1}x"#, #"{"a":01}"#, #"{a:1}"#, "{\"a\":\"é\"}", "", "   ", #"{"a":[}"#,
            String(repeating: "{\"a\":", count: 100) + "1" + String(repeating: "}", count: 100),
        ]
        for body in bodies {
            let sure = Array(body.utf8).withUnsafeBufferPointer { StrictJSONReader.isObject($0) }
            let foundation = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) is [String: Any]
            if let sure { #expect(sure == foundation, "\(body)") }
        }
        #expect(Array(#"{"aps":{"alert":"x"}}"#.utf8).withUnsafeBufferPointer { StrictJSONReader.isObject($0) } == true)
    }

    @Test("skipping a string ends where reading it ends, and fails where reading it fails")
    func skippedStrings() {
        var samples = [#""""#, #""abc""#, #""a\"b""#, #""é""#, #""\u00e9x""#, "\"a\u{01}b\"", #""unterminated"#, "\"", #"x"#, ""]
        samples.append("\"" + String(decoding: [0xC3], as: UTF8.self) + "\"")
        var generator = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = Array("ab\"\\u0e9".utf8) + [0x01, 0x1F, 0x20, 0x7F, 0xC3, 0xA9, 0xFF]
        for _ in 0..<2_000 {
            let length = Int(generator.next() % 8)
            samples.append(String(decoding: [UInt8(ascii: "\"")] + (0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }, as: UTF8.self))
        }
        var raw: [[UInt8]] = samples.map { Array($0.utf8) }
        raw.append([UInt8(ascii: "\""), 0xC3, UInt8(ascii: "\"")])
        raw.append([UInt8(ascii: "\""), 0xFF, 0xFE, UInt8(ascii: "\"")])
        for bytes in raw {
            bytes.withUnsafeBufferPointer { buffer in
                var reading = StrictJSONReader(bytes: buffer)
                var skipping = StrictJSONReader(bytes: buffer)
                let read = reading.string() != nil
                #expect(skipping.skipString() == read, "\(bytes)")
                if read { #expect(skipping.at == reading.at, "\(bytes)") }
            }
        }
    }
}
