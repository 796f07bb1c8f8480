import Foundation
import PushFleetCore
import Testing

/// What `FuzzWire` found in the readers of what a backend under test sends, one test per finding.
@Suite("Wire fuzz findings")
struct WireFuzzFindingsTests {
    static func string(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBufferPointer { buffer in
            var reader = StrictJSONReader(bytes: buffer)
            return reader.string()
        }
    }

    /// A push frame whose `id` held a lone continuation byte was read, the byte repaired to
    /// U+FFFD, where `JSONDecoder` refuses it: the one-pass reader answered otherwise.
    @Test("a string that is not UTF-8 is refused, with escapes or without", arguments: [
        Array(#""8"#.utf8) + [0xBF] + Array(#"c""#.utf8),
        Array(#""\n"#.utf8) + [0xC3] + Array(#"""#.utf8),
        Array(#""\u00e9"#.utf8) + [0xED, 0xA0, 0x80] + Array(#"""#.utf8),
    ])
    func invalidUTF8(bytes: [UInt8]) {
        #expect(Self.string(bytes) == nil)
        #expect((try? JSONDecoder().decode(String.self, from: Data(bytes))) == nil)
    }

    @Test("valid UTF-8 still reads as it is")
    func validUTF8() {
        #expect(Self.string(Array(#""é漢🚀""#.utf8)) == "é漢🚀")
        #expect(Self.string(Array(#""\té""#.utf8)) == "\té")
    }
}
