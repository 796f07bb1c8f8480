import PushFleetResults
import Testing

@Suite("A run's errors in one line")
struct RunResultErrorsLineTests {
    static func result(_ errors: [RunResult.ErrorRow]) -> RunResult {
        var r = HopReportPlatformsTests.result(devices: ["apns": 1], funnel: ["apns": HopReportPlatformsTests.funnel(sends: 1, pairs: 1)])
        r.errors = errors
        return r
    }

    @Test("no errors, no line")
    func none() {
        #expect(Self.result([]).errorsLine() == nil)
    }

    @Test("classes by count, then name, with the seconds each spanned; past the limit, how many more")
    func ordered() {
        let r = Self.result([
            .init(errorClass: "send:timeout", count: 2, firstSecond: 556, lastSecond: 556),
            .init(errorClass: "send:http_502", count: 7, firstSecond: 3, lastSecond: 40),
            .init(errorClass: "fetch:reset", count: 2, firstSecond: 9, lastSecond: 12),
        ])
        #expect(r.errorsLine() == "send:http_502 ×7 (s 3–40), fetch:reset ×2 (s 9–12), send:timeout ×2 (s 556)")
        #expect(r.errorsLine(limit: 1) == "send:http_502 ×7 (s 3–40), 2 more classes")
        #expect(r.errorsLine(limit: 0) == "send:http_502 ×7 (s 3–40), 2 more classes")
    }
}
