import Foundation
import PushFleetLedger
@testable import PushFleetReport
import PushFleetResults
import Testing

/// run.json and users.csv are written a piece at a time; the bytes are those of the whole file
/// encoded in one go, whatever the piece size.
@Suite("Report files written in pieces")
struct ReportStreamTests {
    /// A result with `users` users whose names and counts differ, one with a comma and a quote.
    static func result(users: Int) -> RunResult {
        var r = HopReportPlatformsTests.result(devices: ["apns": 3], funnel: ["apns": HopReportPlatformsTests.funnel(sends: 2, pairs: 2)])
        r.info.scenario = "users \"quoted\", and a \\ backslash with \"users\":[] inside"
        r.users = (0..<users).map { index in
            var counts = DeliveryLedger.Counts()
            counts.expected = index
            counts.delivered = index / 2
            counts.lost = index - index / 2
            let name = index == 1 ? "user,\"1\"" : "user\(index)"
            return RunResult.UserRow(user: name, devices: index % 3 + 1, counts: counts, p50Ms: index.isMultiple(of: 2) ? Double(index) / 8 : nil, p99Ms: Double(index))
        }
        return r
    }

    @Test("run.json in pieces is byte for byte JSONEncoder's whole encoding, and decodes to the same users", arguments: [0, 1, 5, 13])
    func runJSONMatchesWholeEncoding(users: Int) throws {
        let r = Self.result(users: users)
        let whole = try ReportFiles.runJSONEncoder().encode(r)
        for size in [1, 2, 4, 100] {
            var pieces: [Data] = []
            try RunJSONStream.write(r, usersPerPiece: size) { pieces.append($0) }
            #expect(pieces.reduce(Data(), +) == whole, "\(users) users in pieces of \(size)")
            // The users are never encoded all at once: no piece holds more than `size` rows.
            for piece in pieces { #expect(String(decoding: piece, as: UTF8.self).components(separatedBy: "\"devices\":").count - 1 <= size) }
        }
        let decoded = try ReportFiles.decodeRunJSON(try ReportFiles.runJSON(r))
        #expect(decoded.users.map(\.user) == r.users.map(\.user))
        #expect(decoded.users.map(\.counts.lost) == r.users.map(\.counts.lost))
        #expect(decoded.info.scenario == r.info.scenario)
    }

    @Test("the users slot is the top-level key only, never a string or a nested key that looks like it")
    func usersSlotIsTopLevel() {
        let json = Data(#"{"a":"\"users\":[]","b":{"users":[]},"c":["\\",{"users":[]}],"users":[],"z":1}"#.utf8)
        let slot = RunJSONStream.usersSlot(in: json)
        #expect(slot.map { String(decoding: json[..<$0], as: UTF8.self) } == #"{"a":"\"users\":[]","b":{"users":[]},"c":["\\",{"users":[]}],"users":["#)
        #expect(RunJSONStream.usersSlot(in: Data(#"{"b":{"users":[]}}"#.utf8)) == nil)
    }

    @Test("users.csv is the same file whatever the piece size, a row per user, fields escaped")
    func usersCSVPieces() throws {
        let r = Self.result(users: 9)
        var reference = Data()
        try ReportFiles.writeUsersCSV(r, rowsPerPiece: 100) { reference.append($0) }
        for size in [1, 2, 4] {
            var pieces: [Data] = []
            try ReportFiles.writeUsersCSV(r, rowsPerPiece: size) { pieces.append($0) }
            #expect(pieces.reduce(Data(), +) == reference)
            #expect(pieces.count == (9 + size - 1) / size)
        }
        let lines = String(decoding: reference, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 10)
        #expect(lines[0].hasPrefix("user,devices,expected,delivered,"))
        #expect(lines[2].hasPrefix("\"user,\"\"1\"\"\",2,1,0,0,1,"))
        #expect(lines[3].hasPrefix("user2,3,2,1,0,1,") && lines[3].hasSuffix(",0.250,2.000"))
        #expect(lines[4].hasSuffix(",,3.000"))
    }
}
