import Foundation
import PushFleetCore
import PushFleetLedger
@testable import PushFleetMetrics
import PushFleetResults
import PushFleetScenario
import Synchronization
import Testing

/// A shard's event tape gives back every event as it was applied, whatever the kind, and a
/// tape cut or damaged anywhere is an error or a shorter tape, never a crash.
@Suite("Event tape")
struct EventTapeTests {
    static let tokens = ["tok-a", "tok-b", "tok-c", "tok-d"]
    static let origin: Int64 = 5_000_000_000_000
    static let wall: Int64 = 1_764_000_000_000_000_000

    /// One event of every kind, with every optional field both set and unset somewhere.
    static var events: [RunEvent] {
        let o = origin
        var send = DeliveryLedger.Send(
            id: 7, from: 1, to: 0, kind: .secure, platforms: [.fcm, .apns], intended: o + 10, start: o + 12, end: o + 900, succeeded: true,
            contentID: "c-7"
        )
        var unanswered = send
        unanswered.id = 8
        unanswered.contentID = nil
        unanswered.answered = false
        unanswered.succeeded = false
        send.platforms = [.fcm, .apns]
        let path = DeliveryLedger.PushPath(hubAt: o + 100, acceptedAt: o + 200, writtenAt: o + 300, held: true, delayed: false, receivedAt: o + 400)
        let traced = DeliveryLedger.PushPath(
            acceptedAt: o + 200, writtenAt: nil, delayed: true, receivedAt: o + 404, context: TraceIdentity(high: 1, low: UInt64.max, span: 0xABCD)
        )
        let hop = PushHop(
            push: 42, step: .accepted, at: o + 150, platform: "apns", token: "tok-b", pushType: "alert", body: "{\"aps\":{}}", base64: false,
            hubAt: o + 120, status: nil, reason: nil, delay: nil, then: o + 160,
            trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        )
        let refused = PushHop(push: 43, step: .refused, at: o + 151, platform: "wns", token: "not-a-device", status: 401, reason: "a sentence, not a code")
        return [
            .operation(metric: "http.login", nanoseconds: 1_234_567, failed: false, at: o + 1),
            .operation(metric: "http.login", nanoseconds: -5, failed: true, at: o - 1),
            .error(ErrorClass.failed("send", "timeout"), at: o + 2),
            .deviceReady(3, at: o + 3),
            .deviceFailed(0, at: o + 4),
            .eligibility(device: 2, eligible: true, since: o + 5, at: o + 6),
            .send(send),
            .send(unanswered),
            .sendDropped(at: o + 7),
            .senderLate(lag: 11_000_000),
            .receipt(.init(device: 1, attribution: .send(7), time: o + 400, content: .fetched(at: o + 450), contentID: "c-7", path: path), push: 42),
            .receipt(.init(device: 2, attribution: .otherRun, time: o + 401), push: nil),
            .receipt(.init(device: 3, attribution: .content("c-9"), time: o + 402, content: .failed(reason: "status_404")), push: 9),
            .receipt(.init(device: 0, attribution: .unattributable, time: o + 403), push: UInt64.max),
            .receipt(.init(device: 1, attribution: .send(8), time: o + 404, path: traced), push: 45),
            .pushReport(PushReport(hops: [hop, refused], hub: [HubNote(at: o + 99, body: "{}", format: "apple", targets: 3)], lost: 4)),
            .pushReport(PushReport(hops: [hop], hub: nil, lost: nil)),
            .pushReport(PushReport(hops: [], hub: [], lost: 0)),
            .pushServiceView(.unknown("the push service is not pushfleet's")),
            .pushServiceView(.watched(since: o + 8, gaps: [(o + 9)..<(o + 10)])),
            .pushServiceGap((o + 11)..<Int64.max),
            .rejection(.init(device: 2, refused: .send(7), at: o + 500, push: 44)),
            .rejection(.init(device: 2, refused: .unattributable, at: o + 501)),
            .probeLeak(.init(device: 3, time: o + 600, detail: "read c-7 as user4 ✓")),
            .marker("traffic starts", at: o + 700),
        ]
    }

    static func write(_ events: [RunEvent], batches: Int = 3) throws -> [UInt8] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tape-\(UUID().uuidString).pftape").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try EventTapeWriter(path: path, runID: "abc123", shard: try Shard(index: 1, count: 3), tokens: tokens)
        writer.append(events)  // before the header: not kept
        writer.begin(originMonotonic: origin, originWall: wall)
        let size = max(1, events.count / batches)
        for start in stride(from: 0, to: events.count, by: size) { writer.append(Array(events[start..<min(events.count, start + size)])) }
        let summary = writer.finish()
        #expect(summary.events == events.count && summary.failure == nil)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(summary.bytes == bytes.count)
        return bytes
    }

    static func read(_ bytes: [UInt8], shift: Int64 = 0) throws -> (events: [RunEvent], truncated: Bool) {
        var reader = try EventTapeReader(bytes: bytes, tokens: tokens) { _ in shift }
        var events: [RunEvent] = []
        while let event = try reader.next() { events.append(event) }
        return (events, reader.truncated)
    }

    /// The events as their instants relative to the origin read (what a reader with no shift gives).
    static func text(_ events: [RunEvent]) -> [String] { events.map { String(describing: $0) } }

    @Test("every kind of event comes back as written, its instants relative to the run's first, its header intact")
    func roundTrip() throws {
        let bytes = try Self.write(Self.events)
        let header = try EventTapeReader.header(of: bytes)
        #expect(header == .init(runID: "abc123", shard: try Shard(index: 1, count: 3), originMonotonic: Self.origin, originWall: Self.wall))
        // Read with the origin added back: the very events.
        let (events, truncated) = try Self.read(bytes, shift: Self.origin)
        #expect(!truncated)
        var expected = Self.text(Self.events)
        // The gap to the end of time saturates where it was.
        #expect(events.count == expected.count)
        for (index, (got, want)) in zip(Self.text(events), expected).enumerated() { #expect(got == want, "event \(index)") }
        expected.removeAll()
        // Merged onto another time line, every instant moves by the shift and nothing else.
        let (shifted, _) = try Self.read(bytes, shift: 0)
        if case .deviceReady(let device, let at) = shifted[3] { #expect(device == 3 && at == 3) } else { Issue.record("\(shifted[3])") }
    }

    @Test("a tape cut anywhere reads as its whole blocks, marked cut; one damaged anywhere is an error or a shorter tape, never a crash")
    func cutAndDamaged() throws {
        let bytes = try Self.write(Self.events, batches: 6)
        let whole = try Self.read(bytes).events.count
        var cuts = 0
        for length in 0..<bytes.count {
            do {
                let (events, truncated) = try Self.read(Array(bytes[0..<length]))
                #expect(events.count < whole)
                if truncated { cuts += 1 }
            } catch {
                // Only the header can be too short to read.
                #expect(length < 40, "cut at \(length): \(error)")
            }
        }
        #expect(cuts > 0)
        var rng = SplitMix64(seed: 77)
        for _ in 0..<2_000 {
            var damaged = bytes
            for _ in 0..<(1 + Int(rng.next() % 4)) { damaged[Int(rng.next() % UInt64(damaged.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            _ = try? Self.read(damaged)
        }
        #expect(throws: EventTapeReader.Damaged.self) { try Self.read(Array("not a tape at all".utf8)) }
    }

    @Test("a recorder replayed from a tape holds what the recorder that wrote it held")
    func replay() throws {
        let scenario = try ScenarioLoader.parse(
            """
            name: replay
            seed: 3
            target: embedded
            fleet: { users: 2, devices_per_user: 2, platforms: { apns: 1 } }
            traffic:
              - { name: plain, kind: plain, rate: 1/s, duration: 1s }
            """,
            file: "replay.yaml"
        )
        let plan = FleetPlan(scenario: scenario, runID: "abc123")
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tape-\(UUID().uuidString).pftape").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try EventTapeWriter(path: path, runID: plan.runID, shard: .whole, tokens: plan.devices.map(\.token))
        writer.begin(originMonotonic: Self.origin, originWall: Self.wall)
        let original = Recorder(users: plan.users, start: Self.origin, tape: writer)
        for device in plan.devices { original.addDevice(.init(user: device.user, platform: device.platform, token: device.token)) }
        original.apply(Self.events.filter {
            // Views are merged, not replayed one by one; everything else is applied as it came.
            if case .pushServiceView = $0 { false } else if case .pushServiceGap = $0 { false } else { true }
        })
        _ = writer.finish()
        let (replayed, tapes) = Recorder.replaying([Array(try Data(contentsOf: URL(fileURLWithPath: path)))], plan: plan, layouts: [:], wallStart: Self.wall)
        #expect(tapes.count == 1 && tapes[0].damage == nil && !tapes[0].truncated)
        let a = original.state.withLock { [$0.ledger.sends.count, $0.ledger.receipts.count, $0.ledger.rejections.count, $0.ledger.probeLeaks.count, $0.errors.count, $0.live.sends, $0.closed["http.login"]?.count ?? -1, $0.seconds.count, $0.lateWakes] }
        let b = replayed.state.withLock { [$0.ledger.sends.count, $0.ledger.receipts.count, $0.ledger.rejections.count, $0.ledger.probeLeaks.count, $0.errors.count, $0.live.sends, $0.closed["http.login"]?.count ?? -1, $0.seconds.count, $0.lateWakes] }
        #expect(a == b)
        #expect(replayed.state.withLock { $0.ledger.sends[7]?.start } == 12)
    }
}
