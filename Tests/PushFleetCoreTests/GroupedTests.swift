import PushFleetCore
import Testing

@Suite("Counts in messages")
struct GroupedTests {
    @Test("digits in threes with commas, whatever the locale; signs and widths kept")
    func grouped() {
        #expect(0.grouped == "0")
        #expect(999.grouped == "999")
        #expect(1_000.grouped == "1,000")
        #expect(9_968.grouped == "9,968")
        #expect(1_048_576.grouped == "1,048,576")
        #expect((-1_234).grouped == "-1,234")
        #expect(Int.min.grouped == "-9,223,372,036,854,775,808")
        #expect(UInt64.max.grouped == "18,446,744,073,709,551,615")
    }
}
