import Foundation
import PushFleetCore
import PushFleetLedger
import PushFleetReport
import PushFleetResults
import PushFleetTestSupport
import Testing

/// `pushfleet shards --local`, `run --shard` and `merge` from the command line: the shards of a
/// small scenario against one `serve`, merged and compared with the single run; the exit codes
/// of flags and folders that cannot be a run.
@Suite("Shards command")
struct ShardsCLITests {
    static let scenario = """
        name: tinyshards
        seed: 5
        target: embedded
        fleet:
          users: 12
          devices_per_user: { min: 1, max: 3 }
          platforms: { apns: 2, fcm: 1, wns: 1 }
          arrival: { rate: 200/s }
        lifecycle: [login, register, connect, receive, fetch_secure]
        traffic:
          - { name: plain, kind: plain, rate: 10/s, duration: 2s }
          - { name: secure, kind: secure, rate: 10/s, duration: 2s }
        deadline: 5s
        grace: 1s
        thresholds:
          sends.late_start_ratio: []
        """

    static func pushfleet(_ arguments: [String], limit: Duration = .seconds(30)) async throws -> ChildProcess.Outcome {
        try await ChildProcess.run(CLITests.binary, arguments, limit: limit)
    }

    @Test("2 local shards and the single run against a fresh serve each: the ledgers agree, the merge passes, and merging again gives the same")
    func localShardsAgree() async throws {
        let directory = try CLITests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("tiny.yaml")
        try Self.scenario.write(to: file, atomically: true, encoding: .utf8)
        // A shared test machine can starve a run for real (CI runs this beside its builds): the
        // push service then waits for a core, the run names it and is inconclusive (exit 3), and
        // that is right. Each attempt is checked for what holds at any load; one the machine made
        // generator-bound is played again, up to three times.
        var out = directory.appendingPathComponent("run-0")
        var last: (outcome: ChildProcess.Outcome, merged: RunResult)?
        var boundBy: [String] = []
        for attempt in 0..<3 {
            out = directory.appendingPathComponent("run-\(attempt)")
            // Serialised with the other suites' runs: shards are whole fleets.
            let outcome = try await RunGate.exclusive {
                try await Self.pushfleet(["shards", file.path, "--local", "2", "--out", out.path, "--compare", "--quiet"], limit: .seconds(300))
            }
            #expect(outcome.status == 0 || outcome.status == 3, "\(outcome.text)")
            #expect(outcome.text.contains("ledger and operation counts agree"), "\(outcome.text)")
            for shard in ["shard-0-of-2", "shard-1-of-2"] {
                for name in ["shard.json", "events.pftape", "summary.txt"] {
                    #expect(FileManager.default.fileExists(atPath: out.appendingPathComponent(shard).appendingPathComponent(name).path), "\(shard)/\(name)")
                }
            }
            let result = try ReportFiles.decodeRunJSON(Data(contentsOf: out.appendingPathComponent("merged/run.json")))
            #expect(result.delivery.expected > 0 && result.delivery.delivered == result.delivery.expected, "\(result.delivery)")
            #expect(result.delivery.misdelivered == 0 && result.delivery.lost == 0, "\(result.delivery)")
            last = (outcome, result)
            guard outcome.status == 3, result.inconclusive, outcome.text.contains("generator was the limit") else { break }
            boundBy.append(result.generator?.limits.joined(separator: "; ") ?? "")
        }
        guard let (outcome, merged) = last, outcome.status == 0 else {
            Issue.record("every attempt was generator-bound, or one failed: \(boundBy) \(last?.outcome.text ?? "")")
            return
        }
        #expect(merged.passed, "\(merged.delivery)")
        let again = try await Self.pushfleet(["merge", out.path, "--out", directory.appendingPathComponent("again").path])
        #expect(again.status == 0, "\(again.text)")
        let remerged = try ReportFiles.decodeRunJSON(Data(contentsOf: directory.appendingPathComponent("again/run.json")))
        #expect(remerged.delivery == merged.delivery)
        #expect(remerged.histograms["delivery"]?.count == merged.histograms["delivery"]?.count)
        // A shard whose manifest is gone never finished: the merge names it missing and exits 1.
        try FileManager.default.removeItem(at: out.appendingPathComponent("shard-1-of-2/shard.json"))
        let missing = try await Self.pushfleet(["merge", out.path, "--out", directory.appendingPathComponent("missing").path])
        #expect(missing.status == 1, "\(missing.text)")
        #expect(missing.text.contains("shard 1/2 missing"), "\(missing.text)")
        let partial = try ReportFiles.decodeRunJSON(Data(contentsOf: directory.appendingPathComponent("missing/run.json")))
        #expect(partial.info.aborted)
        // Shard 1's sends are not on any replayed tape: the pushes they made are not judged,
        // never counted as misdelivered.
        #expect(partial.delivery.misdelivered == 0, "\(partial.delivery)")
        // A merge Job started beside the shards waits for the missing one, then names it.
        let waited = try await Self.pushfleet(["merge", out.path, "--wait", "2s", "--out", directory.appendingPathComponent("waited").path])
        #expect(waited.status == 1 && waited.text.contains("waited 2s for the shards") && waited.text.contains("shard 1/2 missing"), "\(waited.text)")
        // A tape cut in its middle, then one that is not a tape: named, never a crash, never a pass.
        let tape = out.appendingPathComponent("shard-0-of-2/events.pftape")
        let bytes = try Data(contentsOf: tape)
        try bytes.prefix(bytes.count / 2).write(to: tape)
        let cut = try await Self.pushfleet(["merge", out.path, "--out", directory.appendingPathComponent("cut").path])
        #expect(cut.status == 1 && cut.text.contains("shard 0/2 its tape"), "\(cut.text)")
        try Data("PFTAPE but not really one".utf8).write(to: tape)
        let garbage = try await Self.pushfleet(["merge", out.path, "--out", directory.appendingPathComponent("garbage").path])
        #expect(garbage.status == 1 && garbage.text.contains("shard 0/2 not a pushfleet event tape"), "\(garbage.text)")
    }

    @Test("SIGINT to the command reaches each shard: each stops and writes what it recorded, the merge is marked aborted, exit 1")
    func interrupted() async throws {
        try await RunGate.exclusive {
            let directory = try CLITests.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let long = Self.scenario.replacingOccurrences(of: "duration: 2s", with: "duration: 60s")
            try long.write(to: directory.appendingPathComponent("long.yaml"), atomically: true, encoding: .utf8)
            let (process, pipe) = try CLITests.launch(["shards", "long.yaml", "--local", "2", "--out", "run", "--quiet"], in: directory)
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
            // Long enough for both shards to be past their barrier on a loaded machine.
            let (text, status, stopped) = try await CLITests.interrupt(process, pipe, after: .seconds(8))
            // Well before the 60 s of traffic would have ended.
            #expect(stopped < .seconds(40), "\(text)")
            #expect(status == 1, "\(text)")
            #expect(text.contains("SIGINT: stopping the shards"), "\(text)")
            let run = directory.appendingPathComponent("run")
            for shard in ["shard-0-of-2", "shard-1-of-2"] {
                #expect(FileManager.default.fileExists(atPath: run.appendingPathComponent(shard).appendingPathComponent("shard.json").path), "\(shard): \(text)")
            }
            let merged = try ReportFiles.decodeRunJSON(Data(contentsOf: run.appendingPathComponent("merged/run.json")))
            #expect(merged.info.aborted, "\(text)")
        }
    }

    @Test("flags that cannot make a shard, and folders that cannot be a run, exit 2 with the reason")
    func refusals() async throws {
        let directory = try CLITests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("tiny.yaml")
        try Self.scenario.write(to: file, atomically: true, encoding: .utf8)
        let out = directory.appendingPathComponent("run").path
        let cases: [([String], String)] = [
            (["run", file.path, "--shard", "2/2", "--out", out], "the shard index must be 0…1"),
            (["run", file.path, "--shard", "a/b", "--out", out], "is not a shard"),
            (["run", file.path, "--shard", "0/2", "--shard-index-from-env", "X", "--out", out], "not both"),
            (["run", file.path, "--shard-index-from-env", "PUSHFLEET_TEST_NO_SUCH_VARIABLE", "--shards", "2", "--out", out], "the environment has no"),
            (["run", file.path, "--shard-index-from-env", "PATH"], "needs --shards"),
            (["run", file.path, "--shard", "0/2"], "a shard needs --out"),
            (["run", file.path, "--shard", "0/2", "--out", out], "shards share one system under test"),
            (["run", file.path, "--shard", "0/2", "--out", out, "--backend", "ftp://x", "--push-service", "http://127.0.0.1:1"], "--backend ftp://x"),
            (["run", file.path, "--backend", "http://127.0.0.1:1"], "go together"),
            (["run", file.path, "--run-id", "xyz"], "hex digits"),
            (["run", file.path, "--shard", "0/2", "--out", out, "--start-at", "yesterday"], "--start-at"),
            (["run", file.path, "--shard", "0/2", "--out", out, "--barrier-timeout", "0s"], "--barrier-timeout"),
            (["shards", file.path, "--local", "1"], "give 2–64 shards"),
            (["merge", directory.path, "--out", directory.appendingPathComponent("m1").path], "neither a shard folder"),
        ]
        for (arguments, message) in cases {
            let outcome = try await Self.pushfleet(arguments)
            #expect(outcome.status == 2, "\(arguments): \(outcome.text)")
            #expect(outcome.text.contains(message), "\(arguments): \(outcome.text)")
        }
        // A shard.json that is not one.
        let shard = directory.appendingPathComponent("shard-0-of-2")
        try FileManager.default.createDirectory(at: shard, withIntermediateDirectories: true)
        try Data("{\"format\": 1, \"run_id\": 5}".utf8).write(to: shard.appendingPathComponent("shard.json"))
        let garbage = try await Self.pushfleet(["merge", shard.path, "--out", directory.appendingPathComponent("m2").path])
        #expect(garbage.status == 2 && garbage.text.contains("not a shard's manifest"), "\(garbage.text)")
    }
}
