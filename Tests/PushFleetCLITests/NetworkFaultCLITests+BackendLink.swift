import Foundation
import NIOHTTP1
import PushFleetTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A partition of the link between a backend and the push service, against a backend written
/// apart from the reference one (`.ci/interop/network/push_backend.py`, Python's standard
/// library): the ledger's losses and duplicates must equal the backend's own counts. In the
/// network-fault suite, so that they run one at a time with its other runs.
extension NetworkFaultCLITests {
    static let backendScript = Repository.root.appendingPathComponent(".ci/interop/network/push_backend.py")
    static let backendScenario = Repository.root.appendingPathComponent(".ci/interop/network/scenario.yaml")

    struct BackendOutcome {
        var status: Int32
        var output: String
        var run: [String: Any]
        /// The backend's own counts, from its `GET /stats` after the run.
        var stats: [String: Int]
        var delivery: [String: Int] { run["delivery"] as? [String: Int] ?? [:] }
    }

    /// Runs the scenario against the backend in `mode`, with `fault` on its link to the push
    /// service from 4 s into traffic for 4 s.
    static func play(mode: String, fault: String) async throws -> BackendOutcome {
        let directory = try CLITests.temporaryDirectory()
        let backendPort = try RawSocket.freePort()
        let pushPort = try RawSocket.freePort()
        var yaml = try String(contentsOf: backendScenario, encoding: .utf8)
            .replacingOccurrences(of: "127.0.0.1:8091", with: "127.0.0.1:\(backendPort)")
            .replacingOccurrences(of: "127.0.0.1:8092", with: "127.0.0.1:\(pushPort)")
            .replacingOccurrences(of: "duration: 20s", with: "duration: 12s")
            .replacingOccurrences(of: "grace: 15s", with: "grace: 6s")
        yaml += "network:\n  faults:\n    - { link: backend_push, at: 4s, for: 4s, partition: \(fault) }\n"
        try yaml.write(to: directory.appendingPathComponent("b.yaml"), atomically: true, encoding: .utf8)

        let backend = Process()
        backend.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        backend.arguments = [
            "python3", backendScript.path, "--listen-port", "\(backendPort)", "--pns", "http://127.0.0.1:\(pushPort)", "--mode", mode, "--timeout", "0.5",
        ]
        let log = Pipe()
        backend.standardOutput = log
        backend.standardError = log
        try backend.run()
        // SIGKILL: the test process may hand its children SIGTERM blocked.
        defer {
            kill(backend.processIdentifier, SIGKILL)
            backend.waitUntilExit()
        }
        let statsURL = "http://127.0.0.1:\(backendPort)/stats"
        func stats() async throws -> [String: Int] {
            let answer = try await TestHTTP.request(.GET, statsURL)
            return try JSONSerialization.jsonObject(with: answer.body) as? [String: Int] ?? [:]
        }
        var up = false
        for _ in 0..<100 where !up {
            up = (try? await stats()) != nil
            if !up { try await Task.sleep(for: .milliseconds(100)) }
        }
        try #require(up, "the backend did not answer on \(statsURL)")

        let (process, pipe) = try CLITests.launch(["run", "b.yaml", "--out", "out"], in: directory)
        let (data, status) = try await offPool {
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (data, process.terminationStatus)
        }
        let run = try runJSON(directory)
        return BackendOutcome(status: status, output: String(decoding: data, as: UTF8.self), run: run, stats: try await stats())
    }

    /// Pairs lost at the backend's hop, from the run's "why lost".
    static func lostAtBackend(_ run: [String: Any]) -> Int {
        let why = (run["hops"] as? [String: Any])?["why"] as? [[String: Any]] ?? []
        return why.filter { $0["outcome"] as? String == "lost" && $0["hop"] as? String == "backend" }.reduce(0) { $0 + ($1["count"] as? Int ?? 0) }
    }

    @Test(
        "a backend that does not retry: every push it gave up on in the partition is lost at the backend's hop, exactly as many as it counts itself",
        .enabled(if: available, "needs root, nftables' nft and PUSHFLEET_NETWORK_FAULT_TESTS=1 (.ci/run sets it)"),
        .timeLimit(.minutes(3))
    )
    func notRetrying() async throws {
        // Requests only: with answers cut too, a request taken just before the cut loses its
        // answer, and the backend counts a failure that arrived (pushfleet counts it delivered).
        let outcome = try await Self.play(mode: "noretry", fault: "to_push_service")
        let delivery = outcome.delivery
        let failed = try #require(outcome.stats["failed"])
        #expect(outcome.status == 99, "the scenario's delivery.lost gate: \(outcome.output)")
        #expect(failed > 0 && outcome.stats["queued"] == 0, "\(outcome.stats)")
        #expect(delivery["lost"] == failed, "the ledger's lost \(delivery), the backend's failed \(outcome.stats)")
        #expect(Self.lostAtBackend(outcome.run) == failed, "every loss at the backend's hop: \(outcome.run["hops"] ?? "")")
        #expect(delivery["duplicates"] == 0 && delivery["misdelivered"] == 0, "\(delivery)")
        #expect(delivery["delivered"] == outcome.stats["delivered"], "\(delivery) \(outcome.stats)")
        let windows = outcome.run["networkFaults"] as? [[String: Any]] ?? []
        try #require(windows.count == 1, "\(windows)")
        #expect(windows[0]["label"] as? String == "backend_push partition to push service", "\(windows[0])")
        let inWindow = windows[0]["delivery"] as? [String: Int] ?? [:]
        #expect((inWindow["lost"] ?? 0) > 0 && (inWindow["lost"] ?? 0) <= failed, "\(inWindow)")
        #expect(outcome.output.contains("failing pairs fall in window #1"), "\(outcome.output)")
    }

    @Test(
        "a backend that retries without idempotency while the push service's answers are lost: each push taken unanswered arrives twice, and the ledger counts exactly those duplicates",
        .enabled(if: available, "needs root, nftables' nft and PUSHFLEET_NETWORK_FAULT_TESTS=1 (.ci/run sets it)"),
        .timeLimit(.minutes(3))
    )
    func retryingWithoutIdempotency() async throws {
        let outcome = try await Self.play(mode: "retry", fault: "from_push_service")
        let delivery = outcome.delivery
        let unanswered = try #require(outcome.stats["unanswered"])
        #expect(unanswered > 0 && outcome.stats["failed"] == 0 && outcome.stats["queued"] == 0, "\(outcome.stats)")
        #expect(outcome.status == 99, "the scenario's delivery.duplicates gate: \(outcome.output)")
        #expect(delivery["duplicates"] == unanswered, "the ledger's duplicates \(delivery), the backend's unanswered \(outcome.stats)")
        #expect(delivery["lost"] == 0 && delivery["misdelivered"] == 0, "\(delivery)")
        let windows = outcome.run["networkFaults"] as? [[String: Any]] ?? []
        try #require(windows.count == 1, "\(windows)")
        #expect((windows[0]["delivery"] as? [String: Int])?["duplicates"] ?? 0 > 0, "\(windows[0])")
    }
}
