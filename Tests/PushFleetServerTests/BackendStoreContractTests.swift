import Foundation
import NIOHTTP1
import PushFleetCore
import PushFleetEmbedded
import PushFleetTestSupport
import PushFleetWire
import Testing

@testable import PushFleetBackend

/// One contract, every store driver: the same checks against memory, SQLite and a real
/// PostgreSQL started for the test.
@Suite("Backend store contract")
struct BackendStoreContractTests {
    enum Driver: String, CaseIterable, CustomStringConvertible {
        case memory, sqlite, postgres
        var description: String { rawValue }
    }

    static let second: Int64 = 1_000_000_000
    static let start: Int64 = 1_800_000_000 * second

    /// Opens a fresh store of the driver, runs `body`, and removes what it made.
    static func withStore(
        _ driver: Driver, limits: StoreLimits = .init(), ttl: Duration = .seconds(10),
        _ body: (any BackendStore, BackendConfiguration) async throws -> Void
    ) async throws {
        var configuration = BackendConfiguration(registrationTTL: ttl, notificationTTL: ttl)
        configuration.storeLimits = limits
        // The whole suite shares 2 cores and a cooperative pool that property tests keep busy:
        // a unit of work may wait long for its turn. Nothing here tests the deadline.
        configuration.storeDeadline = .seconds(60)
        switch driver {
        case .memory:
            configuration.store = .memory
            try await body(try await ReferenceBackend.openStore(configuration), configuration)
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("pf-store-\(UUID().uuidString).sqlite").path
            defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
            configuration.store = .sqlite(path: path)
            let store = try await ReferenceBackend.openStore(configuration)
            do { try await body(store, configuration) } catch {
                await store.close()
                throw error
            }
            await store.close()
        case .postgres:
            let server = try await TestPostgres.start()
            configuration.store = .postgres(url: server.url)
            do {
                let store = try await ReferenceBackend.openStore(configuration)
                do { try await body(store, configuration) } catch {
                    await store.close()
                    throw error
                }
                await store.close()
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
    }

    @Test("registrations, the tag index, expiry, owners, handle reuse, feedback, notifications, limits and reopening", arguments: Driver.allCases)
    func contract(_ driver: Driver) async throws {
        let second = Self.second
        let t0 = Self.start
        try await Self.withStore(driver, limits: StoreLimits(maxRegistrations: 5, maxNotifications: 3, maxNotificationBytes: 1000)) {
            store, configuration in
            let a = try await store.createRegistration(owner: "bob", handle: nil, now: t0)
            #expect(try await store.updateRegistration(id: a, owner: "bob", platform: .apns, handle: "h1", tags: ["username:bob"], now: t0) == .updated)
            #expect(try await store.updateRegistration(id: a, owner: "eve", platform: .apns, handle: "h1", tags: ["username:eve"], now: t0) == .notOwner)
            let b = try await store.createRegistration(owner: "bob", handle: nil, now: t0)
            // Incomplete registrations (no PUT yet) are not targets.
            #expect(try await store.targets(tag: "username:bob", now: t0 + 1).map(\.id) == [a])
            #expect(try await store.updateRegistration(id: b, owner: "bob", platform: .fcm, handle: "h2", tags: ["username:bob", "news"], now: t0 + 5 * second) == .updated)
            #expect(Set(try await store.targets(tag: "username:bob", now: t0 + 6 * second).map(\.id)) == [a, b])
            #expect(try await store.targets(tag: "news", now: t0 + 6 * second).map(\.platform) == [.fcm])
            // a expires at 10 s; b was refreshed at 5 s.
            #expect(try await store.targets(tag: "username:bob", now: t0 + 11 * second).map(\.id) == [b])
            #expect(try await store.updateRegistration(id: a, owner: "bob", platform: .apns, handle: "h1", tags: [], now: t0 + 11 * second) == .gone)
            #expect(try await store.deleteRegistration(id: b, owner: "eve", now: t0 + 11 * second) == .notOwner)
            // Creating with a handle: the caller's live registration of it comes back, renewed.
            #expect(try await store.createRegistration(owner: "bob", handle: "h2", now: t0 + 12 * second) == b)
            #expect(try await store.targets(tag: "username:bob", now: t0 + 21 * second).map(\.id) == [b])
            // Another user's claim of the handle deletes bob's registration of it.
            let c = try await store.createRegistration(owner: "carol", handle: "h2", now: t0 + 13 * second)
            #expect(c != b)
            #expect(try await store.targets(tag: "username:bob", now: t0 + 13 * second).isEmpty)
            #expect(try await store.updateRegistration(id: c, owner: "carol", platform: .wns, handle: "h2", tags: ["username:carol"], now: t0 + 13 * second) == .updated)
            // Feedback for a handle the registration no longer has is ignored.
            #expect(try await !store.removeDead(id: c, handle: "h-old"))
            #expect(try await store.removeDead(id: c, handle: "h2"))
            #expect(try await store.targets(tag: "username:carol", now: t0 + 13 * second).isEmpty)

            // Notifications: only the recipient reads; reading marks read; expiry.
            let note = try await store.createNotification(sender: "alice", recipient: "bob", content: .secure(payload: "p"), now: t0)
            #expect(try await store.readNotification(id: note.id, reader: "alice", now: t0 + 1) == nil)
            #expect(try await store.readNotification(id: note.id, reader: "bob", now: t0 + 1)?.read == false)
            let again = try await store.readNotification(id: note.id, reader: "bob", now: t0 + 2)
            #expect(again?.read == true && again?.content == .secure(payload: "p") && again?.sender == "alice")
            let image = Data([0x89, 0x50, 0x4E, 0x47, 0, 1, 2])
            let rich = try await store.createNotification(
                sender: "alice", recipient: "bob", content: .rich(message: "m", type: "img", contentType: "image/png", data: image), now: t0
            )
            #expect(try await store.readNotification(id: rich.id, reader: "bob", now: t0 + 1)?.content == .rich(message: "m", type: "img", contentType: "image/png", data: image))
            #expect(try await store.readNotification(id: note.id, reader: "bob", now: t0 + 10 * second) == nil)
            #expect(try await store.readNotification(id: "no-such-id", reader: "bob", now: t0) == nil)

            // Limits: the count and the bytes of stored notifications, the count of registrations.
            _ = try await store.createNotification(sender: "a", recipient: "b", content: .secure(payload: "x"), now: t0)
            await #expect(throws: StoreError.self) {
                _ = try await store.createNotification(sender: "a", recipient: "b", content: .secure(payload: String(repeating: "y", count: 990)), now: t0)
            }
            try await store.sweep(now: t0 + 30 * second)
            #expect(try await store.counts() == (0, 0))
            for index in 0..<5 { _ = try await store.createRegistration(owner: "u\(index)", handle: nil, now: t0 + 30 * second) }
            await #expect(throws: StoreError.self) { _ = try await store.createRegistration(owner: "u6", handle: nil, now: t0 + 30 * second) }
            #expect(try await store.counts().registrations == 5)

            // A persistent store keeps everything across a close and a reopen.
            guard driver != .memory else { return }
            let kept = try await store.createNotification(sender: "alice", recipient: "bob", content: .secure(payload: "kept"), now: t0 + 30 * second)
            await store.close()
            let reopened = try await ReferenceBackend.openStore(configuration)
            #expect(try await reopened.counts() == (5, 1))
            #expect(try await reopened.readNotification(id: kept.id, reader: "bob", now: t0 + 31 * second)?.content == .secure(payload: "kept"))
            await reopened.close()
        }
    }

    @Test("concurrent creates and updates lose nothing", arguments: Driver.allCases)
    func concurrency(_ driver: Driver) async throws {
        try await Self.withStore(driver, ttl: .seconds(3600)) { store, _ in
            let ids = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        let id = try await store.createRegistration(owner: "user\(index % 4)", handle: nil, now: Self.start)
                        let result = try await store.updateRegistration(
                            id: id, owner: "user\(index % 4)", platform: .apns, handle: "handle-\(index)", tags: ["username:user\(index % 4)"], now: Self.start
                        )
                        #expect(result == .updated)
                        return id
                    }
                }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(ids.count == 40)
            for user in 0..<4 {
                #expect(try await store.targets(tag: "username:user\(user)", now: Self.start + 1).count == 10)
            }
        }
    }
}

/// The embedded backend restarted as a process is: with a persistent store nothing is lost; with
/// memory every registration is gone.
@Suite("Backend restarts")
struct BackendRestartTests {
    @Test("registrations survive a restart with SQLite and are gone (410) with memory", arguments: [true, false])
    func restart(_ persistent: Bool) async throws {
        var configuration = EmbeddedSystem.Configuration()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pf-restart-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        if persistent { configuration.backend.store = .sqlite(path: path) }
        try await TestSystem.runEmbedded(configuration) { (system: EmbeddedSystem, test: TestSystem) async throws in
            let device = try await TestDevice.connect(pushService: test.pushService, platform: .apns)
            let id = try await test.register("bob", platform: .apns, handle: device.address!.token)
            let before = test.backend
            try await system.restartBackend(downFor: .milliseconds(200))
            #expect(try await system.endpoints().backend == before)
            // The client's pool may still hold a keep-alive connection to the stopped process that
            // it has not yet seen closed; one request takes it out before the ones checked below.
            _ = try? await TestHTTP.request(.GET, "\(test.backend)/health")
            let put = try await test.updateRegistration(id, "bob", platform: "apns", handle: device.address!.token)
            #expect(put.status == (persistent ? 200 : 410), "\(put.status)")
            let send = try await test.sendPlain(from: "alice", to: "bob", pns: "apns", message: "after the restart")
            #expect(try send.json(SendOutcome.self).outcome == (persistent ? .completed : .noTargetFound))
            if persistent { #expect(try await device.waitForPushes(1).count == 1) }
            #expect(try await test.backendStats().registrations == (persistent ? 1 : 0))
        }
    }
}
