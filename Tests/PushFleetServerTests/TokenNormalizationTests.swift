@testable import PushFleetMockPush
import PushFleetWire
import Testing

/// APNs device tokens are matched in lower case; the byte-wise path must agree with Unicode's.
@Suite("Token normalization")
struct TokenNormalizationTests {
    @Test("an APNs token is lower-cased as String.lowercased() does, ASCII or not; other platforms' tokens are kept")
    func apnsLowerCase() {
        var samples = ["", "abcdef0123", "ABCDEF0123", "aBcDeF", "ÀBC", "tokenÉ", "ǅx", "İstanbul", "ß", "A\u{301}B", "@[`{"]
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("aAzZ09@[`{~ÉéİßǅΣ\u{301}")
        for _ in 0..<2_000 {
            samples.append(String((0..<Int(generator.next() % 12)).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }))
        }
        for sample in samples {
            #expect(TokenRules.normalized(sample[...], for: .apns) == sample.lowercased(), "\(sample)")
            #expect(TokenRules.normalized(sample[...], for: .fcm) == sample, "\(sample)")
        }
    }
}
