import Foundation
import NIOHTTP1
import PushFleetCore
@testable import PushFleetMockPush
import PushFleetTestSupport
import PushFleetWire
import Testing

/// `/observe`: a run in another process watches what becomes of its pushes.
@Suite("Push service reports (/observe)")
struct ObserveTests {
    static let run = "abc123def456"

    /// An APNs token of the run: 64 hex digits starting with the run id.
    static func token(_ n: Int) -> String {
        let tail = String(format: "%052x", n)
        return run + tail
    }

    @Test("a run sees its pushes: written to an online device (one report), held for an offline one, refused with status, reason and body; nothing of other runs")
    func reportsOfTheRun() async throws {
        try await TestSystem.run { system in
            let observer = try await TestSystem.observerOrFail(system)
            let device = try await TestDevice.connect(pushService: system.pushService, platform: .apns, token: Self.token(1))
            // Online: accepted and written go out as one report, its push number the frame's.
            #expect(try await system.apnsPush(token: Self.token(1), body: #"{"aps":{"alert":"pf:abc123def456:1"}}"#).status == 200)
            let frame = try #require(try await device.waitForPushes(1).first)
            #expect(frame.push != nil && frame.writtenAt != nil && frame.writtenAt! >= frame.acceptedAt)
            // Offline: accepted, then held.
            #expect(try await system.apnsPush(token: Self.token(2), body: #"{"aps":{"alert":"pf:abc123def456:2"}}"#).status == 200)
            // Refused before its body was read: the body is read for the report.
            let refused = try await system.apnsPush(
                token: Self.token(3), body: #"{"aps":{"alert":"pf:abc123def456:3"}}"#, headers: [("authorization", "bearer wrong")]
            )
            #expect(refused.status == 403)
            // Another run's token and nonce: not this run's.
            #expect(try await system.apnsPush(token: String(repeating: "f", count: 64), body: #"{"aps":{"alert":"pf:0000:1"}}"#).status == 200)
            // Another run's token carrying this run's nonce: reported (the backend addressed the wrong token).
            #expect(try await system.apnsPush(token: String(repeating: "e", count: 64), body: #"{"aps":{"alert":"pf:abc123def456:4"}}"#).status == 200)
            // Every report expected: the online push's one or two, the offline's two, the refusal,
            // the misaddressed one. Then a moment more, for a report that should not come.
            try await observer.waitFor { observer in
                let online = observer.hops.filter { $0.token == Self.token(1) }
                return online.last?.step == .written && observer.hops.count >= 4 + online.count
                    && observer.hops.contains { $0.token == String(repeating: "e", count: 64) && $0.step == .accepted }
            }
            try await Task.sleep(for: .milliseconds(100))
            let hops = observer.hops
            // Written before its first report went out, the push is one report; on a loaded
            // machine the accepted report may leave first, and the written one follows it.
            let online = hops.filter { $0.token == Self.token(1) }
            #expect(hops.count == 4 + online.count, "\(hops)")
            let written = try #require(online.last)
            if online.count == 1 {
                #expect(written.step == .written && written.push == frame.push && written.then == frame.writtenAt && written.at == frame.acceptedAt)
            } else {
                #expect(online.map(\.step) == [.accepted, .written] && online[0].at == frame.acceptedAt, "\(online)")
                #expect(written.push == frame.push && (written.then ?? written.at) == frame.writtenAt, "\(written)")
            }
            #expect(online[0].body?.contains("pf:abc123def456:1") == true && online[0].pushType == "alert" && online[0].platform == "apns")
            #expect(hops.filter { $0.token == Self.token(2) }.map(\.step) == [.accepted, .held])
            let refusal = try #require(hops.first { $0.token == Self.token(3) })
            #expect(refusal.step == .refused && refusal.status == 403 && refusal.reason == "InvalidProviderToken")
            #expect(refusal.body?.contains("pf:abc123def456:3") == true)
            #expect(hops.contains { $0.token == String(repeating: "e", count: 64) && $0.step == .accepted })
            #expect(!hops.contains { $0.token == String(repeating: "f", count: 64) })
            // The observer is not a device.
            let stats = try await system.pushStats()
            #expect(stats.deviceSockets == 1, "\(stats)")
            observer.close()
            device.close()
        }
    }

    @Test("what a watcher sends is read and dropped; a frame past the gateway's 4 MiB closes it; the service and other watchers go on")
    func hostileWatcher() async throws {
        try await TestSystem.run { system in
            let chatty = try await TestDevice.observer(pushService: system.pushService, run: Self.run)
            try await chatty.sendRaw("{\"op\":\"subscribe\",\"devices\":[")
            try await chatty.sendRaw(String(repeating: "x", count: 10_000))
            let flooding = try await TestDevice.observer(pushService: system.pushService, run: Self.run)
            try await flooding.sendRaw(String(repeating: "y", count: 5 << 20))
            try await flooding.waitFor { $0.closed }
            #expect(try await system.apnsPush(token: Self.token(7), body: #"{"aps":{"alert":"pf:abc123def456:7"}}"#).status == 200)
            try await chatty.waitFor { $0.hops.contains { $0.token == Self.token(7) } }
            #expect(try await TestHTTP.request(.GET, "\(system.pushService)/health").status == 200)
            chatty.close()
        }
    }

    @Test("a push handed to a connection that closes before it goes out is reported lost there")
    func lostToAClosingConnection() async throws {
        let service = PushService()
        let reports = ReportQueue(limit: 100)
        let watch = service.watch(run: Self.run) { reports.add($0) }
        defer { watch.cancel() }
        let connection = service.openConnection(mode: .single(DeviceAddress(platform: .apns, token: Self.token(9))))
        service.attach([DeviceAddress(platform: .apns, token: Self.token(9))], to: connection)
        let push = service.nextPush()
        let outcome = service.accept(
            .init(address: .init(platform: .apns, token: Self.token(9)), id: "x", pushType: "alert", body: "{}", retention: .defaultDuration, push: push)
        )
        #expect(outcome == .accepted(acceptedAt: outcome.acceptedAt, online: true))
        // Nothing writes the connection: it closes with the push still queued.
        service.closeConnection(connection)
        let batch = try #require(await reports.next(max: 100))
        #expect(batch.hops.map(\.step) == [.accepted, .disconnected] && batch.hops.allSatisfy { $0.push == push })
    }

    @Test("the queue sends a push accepted and written in one batch as one report, and counts what it leaves out past its length")
    func queue() async throws {
        let queue = ReportQueue(limit: 3)
        func hop(_ push: UInt64, _ step: PushHop.Step, _ at: Int64) -> PushHop {
            PushHop(push: push, step: step, at: at, platform: "apns", token: "t", pushType: step.isFirst ? "alert" : nil, body: step.isFirst ? "{}" : nil)
        }
        queue.add(PushReport(hops: [hop(1, .accepted, 10), hop(2, .accepted, 11), hop(1, .written, 12), hop(2, .held, 13)]))
        queue.add(PushReport(hops: [hop(3, .accepted, 14), hop(4, .accepted, 15)]))
        let batch = try #require(await queue.next(max: 10))
        #expect(batch.hops.map(\.push) == [1, 2, 2])
        #expect(batch.hops[0].step == .written && batch.hops[0].at == 10 && batch.hops[0].then == 12 && batch.hops[0].body == "{}")
        #expect(batch.lost == 2)
        // A written report after its first went out is its own report.
        queue.add(PushReport(hops: [hop(2, .written, 20)]))
        let next = try #require(await queue.next(max: 10))
        #expect(next.hops.map(\.step) == [.written] && next.lost == nil)
    }

    @Test("/observe needs a run id of 4 to 64 letters and digits", arguments: ["", "?run=", "?run=ab", "?run=a%20b", "?run=" + String(repeating: "a", count: 65)])
    func badRunID(query: String) async throws {
        try await TestSystem.run { system in
            let response = try await TestHTTP.request(.GET, "\(system.pushService)/observe\(query)")
            #expect(response.status == 400, "\(response.status) \(response.text)")
        }
    }
}

extension PushService.AcceptOutcome {
    var acceptedAt: Int64 {
        if case .accepted(let at, _) = self { return at }
        return 0
    }
}

extension TestSystem {
    static func observerOrFail(_ system: TestSystem) async throws -> TestDevice {
        try await TestDevice.observer(pushService: system.pushService, run: ObserveTests.run)
    }
}
