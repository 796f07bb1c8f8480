import Foundation
import Logging
import NIOHTTP1
import PushFleetCore
@testable import PushFleetBackend
import PushFleetEmbedded
import PushFleetServerSupport
import PushFleetTestSupport
import PushFleetWire
import Synchronization
import Testing

/// A store that vanishes or fills up under a running backend: each is answered as
/// docs/backend.md says (503 `store_unreachable`, 507 `store_full`) with the reason in the
/// body, logged once per episode, and counted in `/stats`.
@Suite("Store failures")
struct StoreFailureTests {
    @Test("an episode is logged once: it starts at the first refusal of a problem and ends at the call that proves it gone")
    func episodes() {
        var health = StoreHealth()
        #expect(health.succeeded(wrote: true) == .none)
        #expect(health.refused(.full) == .started(.full))
        #expect(health.refused(.full) == .none)
        // Reads work on a full disk: they end nothing.
        #expect(health.succeeded(wrote: false) == .none)
        #expect(health.refused(.full) == .none)
        #expect(health.refused(.unreachable) == .started(.unreachable))
        #expect(health.refused(.unreachable) == .none)
        #expect(health.succeeded(wrote: false) == .ended(.unreachable))
        #expect(health.current == nil)
        #expect(health.refused(.limit) == .started(.limit))
        #expect(health.succeeded(wrote: true) == .ended(.limit))
        #expect(health.succeeded(wrote: true) == .none)
    }

    @Test("the SQLite file deleted or moved away under the backend: 503 store_unreachable naming the path, logged once, counted; back in place, it works again")
    func sqliteFileVanishes() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("store.sqlite").path
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.store = .sqlite(path: path)
        let logs = LogCapture()
        try await EmbeddedSystem.withRunning(configuration, logger: logs.logger) { _, endpoints in
            let backend = endpoints.backend
            #expect(try await Self.createRegistration(backend, "bob").status == 200)

            try FileManager.default.moveItem(atPath: path, toPath: path + ".away")
            for _ in 0..<3 {
                let refused = try await Self.createRegistration(backend, "bob")
                #expect(refused.status == 503)
                let error = try Self.errorObject(refused)
                #expect(error["reason"] as? String == "store_unreachable", "\(refused.text)")
                #expect((error["message"] as? String)?.contains(path) == true, "\(refused.text)")
            }
            let stats = try await TestHTTP.request(.GET, "\(backend)/stats")
            #expect(stats.status == 200, "\(stats.text)")
            let counted = try stats.json(BackendStats.self)
            #expect(counted.storeUnreachable == 3 && counted.storeProblem == "store_unreachable")

            try FileManager.default.moveItem(atPath: path + ".away", toPath: path)
            #expect(try await Self.createRegistration(backend, "bob").status == 200)
            #expect(try await TestHTTP.request(.GET, "\(backend)/stats").json(BackendStats.self).storeProblem == nil)

            // Deleted, and a new file made at the path: writes there would be lost to the
            // server's open handle either way.
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            _ = FileManager.default.createFile(atPath: path, contents: Data())
            let gone = try await Self.createRegistration(backend, "bob")
            #expect(gone.status == 503 && gone.text.contains("store_unreachable"), "\(gone.text)")
            #expect(try await TestHTTP.request(.GET, "\(backend)/stats").json(BackendStats.self).storeUnreachable == 4)
        }
        let storeLines = logs.lines.filter { $0.contains("store") }
        #expect(storeLines.filter { $0.hasPrefix("error") }.count == 2, "\(storeLines)")
        #expect(storeLines.filter { $0.hasPrefix("notice") }.count == 1, "\(storeLines)")
        #expect(storeLines.allSatisfy { $0.contains(path) }, "\(storeLines)")
    }

    /// "Disk full" through SQLite's own cap, `PRAGMA max_page_count`: a write past it fails with
    /// SQLITE_FULL, the error a full disk gives (ENOSPC), without needing a small filesystem.
    @Test("a SQLite store that cannot grow: 507 store_full with the reason, logged once, counted; reads still answer")
    func sqliteFull() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("store.sqlite").path
        var configuration = BackendConfiguration()
        configuration.store = .sqlite(path: path)
        let storeConfiguration = configuration
        let backend = ReferenceBackend(configuration: configuration, pushServiceURL: { "http://127.0.0.1:9" }) {
            SQLStore(executor: try await SQLiteExecutor.open(path: path, pragmas: ["PRAGMA max_page_count = 12"]), configuration: storeConfiguration)
        }
        let logs = LogCapture()
        try await withServices([backend.makeService(logger: logs.logger)], logger: logs.logger) {
            let url = try await backend.bound.value().httpURL
            var created = 0
            var refused: TestResponse?
            while created < 2000 {
                let response = try await Self.createRegistration(url, "user\(created)")
                guard response.status == 200 else {
                    refused = response
                    break
                }
                created += 1
            }
            let full = try #require(refused, "2000 registrations fit in 12 pages")
            #expect(created > 0)
            #expect(full.status == 507, "\(full.text)")
            #expect(try Self.errorObject(full)["reason"] as? String == "store_full", "\(full.text)")
            #expect(try await Self.createRegistration(url, "late").status == 507)
            let stats = try await TestHTTP.request(.GET, "\(url)/stats")
            #expect(stats.status == 200, "\(stats.text)")
            let counted = try stats.json(BackendStats.self)
            #expect(counted.registrations == created && counted.storeFull == 2 && counted.storeProblem == "store_full")
        }
        let storeLines = logs.lines.filter { $0.contains("store") }
        #expect(storeLines.filter { $0.hasPrefix("error") && $0.contains("store_full") }.count == 1, "\(storeLines)")
    }

    /// The store opened on a disk already full: creating the schema fails with SQLITE_FULL
    /// (here through `max_page_count = 1`); the connection opened must be closed, not dropped.
    @Test("a SQLite store that cannot be set up for lack of space: 507 store_full, and the server lives on")
    func sqliteFullAtOpening() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("store.sqlite").path
        var configuration = BackendConfiguration()
        configuration.store = .sqlite(path: path)
        // Full until the test says otherwise, as a disk that gets some space back.
        let diskFull = Atomic<Bool>(true)
        let backend = ReferenceBackend(configuration: configuration, pushServiceURL: { "http://127.0.0.1:9" }) { [configuration] in
            let full = diskFull.load(ordering: .relaxed)
            return SQLStore(
                executor: try await SQLiteExecutor.open(path: path, pragmas: full ? ["PRAGMA max_page_count = 1"] : []), configuration: configuration
            )
        }
        let logs = LogCapture()
        try await withServices([backend.makeService(logger: logs.logger)], logger: logs.logger) {
            let url = try await backend.bound.value().httpURL
            let refused = try await Self.createRegistration(url, "bob")
            #expect(refused.status == 507, "\(refused.text)")
            #expect(try Self.errorObject(refused)["reason"] as? String == "store_full", "\(refused.text)")
            #expect(try await TestHTTP.request(.GET, "\(url)/health").status == 200)
            #expect(try await Self.createRegistration(url, "bob").status == 507)
            // The failed opening is not kept: the next call opens the store again.
            diskFull.store(false, ordering: .relaxed)
            #expect(try await Self.createRegistration(url, "bob").status == 200)
        }
        #expect(logs.lines.filter { $0.hasPrefix("notice") && $0.contains("store works again after store_full") }.count == 1, "\(logs.lines)")
    }

    @Test("a configured limit is 507 store_limit with the reason in the body")
    func limit() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.storeLimits = StoreLimits(maxRegistrations: 1)
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            #expect(try await Self.createRegistration(system.backend, "bob").status == 200)
            let refused = try await Self.createRegistration(system.backend, "bob")
            #expect(refused.status == 507)
            #expect(try Self.errorObject(refused)["reason"] as? String == "store_limit", "\(refused.text)")
            #expect(try await system.backendStats().storeFull == 1)
        }
    }

    @Test("PostgreSQL gone under the backend: 503 store_unreachable with the reason")
    func postgresGone() async throws {
        let server = try await TestPostgres.start()
        var configuration = EmbeddedSystem.Configuration()
        configuration.backend.store = .postgres(url: server.url)
        // Long enough for the first registration on a busy machine; the refusal comes after it.
        configuration.backend.storeDeadline = .seconds(10)
        do {
            try await TestSystem.run(configuration) { (system: TestSystem) async throws in
                // The store opens on first use, within its 30 s deadline for a starting server.
                #expect(try await Self.createRegistration(system.backend, "bob", timeout: .seconds(60)).status == 200)
                await server.stop()
                let refused = try await Self.createRegistration(system.backend, "bob", timeout: .seconds(60))
                #expect(refused.status == 503, "\(refused.text)")
                #expect(try Self.errorObject(refused)["reason"] as? String == "store_unreachable", "\(refused.text)")
                #expect(try await system.backendStats().storeUnreachable == 1)
            }
        } catch {
            await server.stop()
            throw error
        }
    }

    @Test("a unit of work that answers is never taken for one past its deadline, however the two race; one that hangs is")
    func deadlineRace() async throws {
        // The work's answer and the timer's cancellation race on every call: 2,000 calls, 8 at a time.
        try await withThrowingTaskGroup(of: Int?.self) { group in
            for index in 0..<2_000 {
                if index >= 8, let answer = try await group.next() { #expect(answer != nil) }
                group.addTask { try await PostgresExecutor.first(within: .seconds(30)) { index } }
            }
            for try await answer in group { #expect(answer != nil) }
        }
        // A unit of work that ignores cancellation and never ends: nil at the deadline.
        let hung = try await PostgresExecutor.first(within: .milliseconds(50)) { () async -> Int in
            // Unsafe: a checked continuation never resumed is reported as misuse once it is freed.
            await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }
            return 1
        }
        #expect(hung == nil)
        // A failure is the work's own error, not a timeout.
        await #expect(throws: StoreError.self) {
            _ = try await PostgresExecutor.first(within: .seconds(30)) { () async throws -> Int in throw StoreError.unavailable("x") }
        }
    }

    // MARK: Helpers

    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pf-store-failure-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// The timeout bounds only a hang: SQLite's writes have taken over 20 s beside a loaded
    /// suite and two builds.
    static func createRegistration(_ backend: String, _ user: String, timeout: Duration = .seconds(300)) async throws -> TestResponse {
        try await TestHTTP.request(.POST, "\(backend)/api/register", auth: .user(user), timeout: timeout)
    }

    /// The `error` object of an error answer.
    static func errorObject(_ response: TestResponse) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return try #require(object?["error"] as? [String: Any], "\(response.text)")
    }
}
