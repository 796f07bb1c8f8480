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
}
