import PushFleetCore
import PushFleetServerSupport
import Testing

@Suite("Expiry sweep")
struct ExpirySweepTests {
    static let second: Int64 = 1_000_000_000

    @Test("a sweep is due only once more than the interval has passed since the last one")
    func dueEveryInterval() {
        var sweep = ExpirySweep()
        let instants = [30 * Self.second, 30 * Self.second + 1, 31 * Self.second, 60 * Self.second + 1, 60 * Self.second + 2]
        let answers = instants.map { sweep.isDue(now: $0, interval: 30 * Self.second) }
        #expect(answers == [false, true, false, false, true])
        #expect(sweep.last == 60 * Self.second + 2)
    }

    @Test("of callers at one instant only the first is told to sweep; a shorter interval makes it due sooner")
    func oneWinnerAndShorterInterval() {
        var sweep = ExpirySweep(last: 100 * Self.second)
        let now = 102 * Self.second
        let intervals = [30 * Self.second, Self.second, Self.second]
        let answers = intervals.map { sweep.isDue(now: now, interval: $0) }
        #expect(answers == [false, true, false])
        #expect(sweep.last == now)
    }

    @Test("instants far apart do not trap: a clock that jumped back is not due, one far ahead is")
    func extremes() {
        var back = ExpirySweep(last: .max)
        let backDue = back.isDue(now: .min, interval: 0)
        #expect(!backDue && back.last == .max)
        var ahead = ExpirySweep(last: .min)
        let aheadDue = ahead.isDue(now: .max, interval: .max)
        #expect(aheadDue && ahead.last == .max)
    }

    @Test("expired entries are those whose expiry is at or before now; no expiry never expires")
    func expiredEntries() {
        let entries: [String: Int64?] = ["past": 5, "now": 10, "later": 11, "never": nil]
        let expired = ExpirySweep.expired(in: entries, now: 10) { $0 }
        #expect(Set(expired) == ["past", "now"])
        #expect(ExpirySweep.expired(in: entries, now: .min) { $0 }.isEmpty)
        #expect(Set(ExpirySweep.expired(in: entries, now: .max) { $0 }) == ["past", "now", "later"])
        #expect(ExpirySweep.expired(in: [String: Int64](), now: 10) { $0 }.isEmpty)
    }
}
