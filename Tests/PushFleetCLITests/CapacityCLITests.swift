import Foundation
import PushFleetReport
import PushFleetResults
import PushFleetTestSupport
import Testing

/// `pushfleet capacity` end to end: a push service given a known capacity (60 pushes/s) is
/// found, the hop that broke is named, and the reports are written; the exit codes.
@Suite("Capacity command")
struct CapacityCLITests {
    /// 30 users with one APNs device each, plain sends to random users; the push service
    /// delivers at most 60 pushes/s. The late-start rule is dropped: on a shared test machine a
    /// late wake is noise, and it would end the search as generator-bound.
    static func scenario(capacity: String = "{ start: 20/s, factor: 2, max: 160/s, resolution: 20%, warmup: 1s, window: 3s, repeats: 1 }") -> String {
        """
        name: capcli
        seed: 11
        target: embedded
        fleet:
          users: 30
          devices_per_user: 1
          platforms: { apns: 1 }
        lifecycle: [login, register, connect, receive]
        traffic:
          - { name: plain, kind: plain, from: random_user, to: random_user, platforms: [apns], rate: 20/s, duration: 4s }
        faults:
          - { at: 0s, pns: { service_rate: 60/s } }
        deadline: 2s
        grace: 1s
        thresholds:
          delivery.latency: ["p(99) < 250ms"]
          delivery.lost_ratio: ["value <= 0.001"]
          sends.late_start_ratio: []
        capacity: \(capacity)
        """
    }

    /// The limit bounds a search gone wrong; it is no measure of speed (a loaded machine takes
    /// several times longer than an idle one).
    static func capacity(_ arguments: [String], limit: Duration = .seconds(600)) async throws -> ChildProcess.Outcome {
        // Serialised with the gated runs of other suites: the search's steps are whole fleet runs.
        try await RunGate.exclusive { try await ChildProcess.run(CLITests.binary, ["capacity"] + arguments, limit: limit) }
    }

    /// One search (each is a dozen whole runs): the capacity is found and written, and a
    /// requirement above it fails the search. CI's own capacity search checks the passing exit.
    @Test("a push service of 60/s is found between 48 and 66 sends/s, its hop named, the reports written; --require above it exits 99")
    func findsKnownCapacity() async throws {
        let directory = try CLITests.temporaryDirectory()
        let file = directory.appendingPathComponent("cap.yaml")
        try Self.scenario().write(to: file, atomically: true, encoding: .utf8)
        let out = directory.appendingPathComponent("out")
        let found = try await Self.capacity([file.path, "--out", out.path, "--quiet", "--require", "1000/s"])
        #expect(found.status == 99, "\(found.text)")
        #expect(found.text.contains("required 1,000 sends/s: NOT met"), "\(found.text)")
        for name in ["capacity.json", "steps.csv", "report.html"] {
            #expect(FileManager.default.fileExists(atPath: out.appendingPathComponent(name).path), "\(name) missing")
        }
        let result = try CapacityReport.decode(Data(contentsOf: out.appendingPathComponent("capacity.json")))
        #expect(result.outcome == "found", "\(result.summary)")
        let capacity = try #require(result.capacity, "\(result.summary)")
        #expect(capacity >= 48 && capacity <= 66, "\(capacity): \(result.summary)")
        let firstFail = try #require(result.firstFail)
        #expect(firstFail > 60 && firstFail <= 160 && firstFail / capacity <= 1.2 + 1e-9, "\(result.summary)")
        #expect(result.brokeAt?.hop == "push_service", "\(String(describing: result.brokeAt))")
        #expect(result.brokeAt?.load == firstFail)
        #expect(result.summary.contains("capacity \(CapacityResult.format(capacity)) sends/s"), "\(result.summary)")
        #expect(result.generatorBoundAt == nil)
        #expect(result.required == 1000 && result.meetsRequirement == false)
        #expect(result.unit == "sends/s" && result.vary == "rate")
        #expect(result.warmupSeconds == 1 && result.windowSeconds == 3)
        // The ladder's steps 20, 40 and 80 came first.
        #expect(result.steps.prefix(3).map(\.load) == [20, 40, 80])
        #expect(result.steps.prefix(2).allSatisfy { $0.verdict == "pass" })
        #expect(result.steps.count <= 8)
        #expect(found.text.contains("capcli capacity"), "\(found.text)")

        let html = try String(contentsOf: out.appendingPathComponent("report.html"), encoding: .utf8)
        for id in CapacityReport.chartIDs { #expect(html.contains(id), "report.html lacks \(id)") }
        let csv = try String(contentsOf: out.appendingPathComponent("steps.csv"), encoding: .utf8)
        #expect(csv.split(separator: "\n").count == result.steps.count + 1, "\(csv)")

        // A folder per step, each with its own run.json.
        let steps = try FileManager.default.contentsOfDirectory(atPath: out.appendingPathComponent("steps").path).sorted()
        #expect(steps.count == result.steps.count, "\(steps)")
        for step in result.steps {
            #expect(FileManager.default.fileExists(atPath: out.appendingPathComponent(step.report).appendingPathComponent("run.json").path), "\(step.report)")
        }

    }

    @Test("a scenario without capacity: exits 2 and says so; a --require that is not a rate exits 2")
    func invalidInput() async throws {
        let directory = try CLITests.temporaryDirectory()
        let file = directory.appendingPathComponent("plain.yaml")
        let plain = Self.scenario().components(separatedBy: "\n").filter { !$0.hasPrefix("capacity:") }.joined(separator: "\n")
        #expect(!plain.contains("capacity"))
        try plain.write(to: file, atomically: true, encoding: .utf8)
        let missing = try await ChildProcess.run(CLITests.binary, ["capacity", file.path, "--out", directory.appendingPathComponent("o").path])
        #expect(missing.status == 2, "\(missing.text)")
        #expect(missing.text.contains("capacity:"), "\(missing.text)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("o/capacity.json").path))

        let withCapacity = directory.appendingPathComponent("cap.yaml")
        try Self.scenario().write(to: withCapacity, atomically: true, encoding: .utf8)
        let badRequire = try await ChildProcess.run(CLITests.binary, ["capacity", withCapacity.path, "--require", "lots", "--out", directory.appendingPathComponent("p").path])
        #expect(badRequire.status == 2, "\(badRequire.text)")
        #expect(badRequire.text.contains("--require"), "\(badRequire.text)")

        let invalid = directory.appendingPathComponent("bad.yaml")
        try Self.scenario(capacity: "{ start: 20/s, max: 10/s }").write(to: invalid, atomically: true, encoding: .utf8)
        let bad = try await ChildProcess.run(CLITests.binary, ["capacity", invalid.path])
        #expect(bad.status == 2, "\(bad.text)")
        #expect(bad.text.contains("capacity.max: must be above capacity.start"), "\(bad.text)")
    }

    @Test("hostile capacity inputs to compare and serve: garbage capacity.json, a search against a run, a service rate out of range")
    func hostileInputs() async throws {
        let directory = try CLITests.temporaryDirectory()
        let manager = FileManager.default
        for name in ["garbage", "good", "run"] { try manager.createDirectory(at: directory.appendingPathComponent(name), withIntermediateDirectories: true) }
        try Data("{\"outcome\": 7, ".utf8).write(to: directory.appendingPathComponent("garbage/capacity.json"))
        try Data("{}".utf8).write(to: directory.appendingPathComponent("run/run.json"))
        var good = CapacityResult(
            version: "t", scenario: "s", scenarioFile: "s.yaml", target: "embedded", host: "h", cores: 2, startedAt: "", endedAt: "", vary: "rate",
            unit: "sends/s", slo: [], warmupSeconds: 1, windowSeconds: 3, outcome: "found", steps: []
        )
        good.capacity = 100
        good.lastPass = 100
        try CapacityReport.json(good).write(to: directory.appendingPathComponent("good/capacity.json"))

        let garbage = try await CLITests.run(["compare", "good", "garbage"], in: directory)
        #expect(garbage.status == 2, "\(garbage.output)")
        #expect(garbage.output.contains("is not a pushfleet capacity.json"), "\(garbage.output)")
        let mixed = try await CLITests.run(["compare", "good", "run"], in: directory)
        #expect(mixed.status == 2, "\(mixed.output)")
        #expect(mixed.output.contains("compare like with like"), "\(mixed.output)")
        let same = try await CLITests.run(["compare", "good", "good"], in: directory)
        #expect(same.status == 0, "\(same.output)")
        #expect(same.output.contains("verdict: passed"), "\(same.output)")

        for faults in [#"{"serviceRate": 0}"#, #"{"serviceRate": 1e300}"#, #"{"serviceRate": 10, "serviceQueue": -3}"#] {
            let serve = try await CLITests.run(["serve", "--backend-listen", "127.0.0.1:0", "--pns-listen", "127.0.0.1:0", "--faults", faults], in: directory)
            #expect(serve.status == 2, "\(faults): \(serve.output)")
            #expect(serve.output.contains("--faults: service"), "\(faults): \(serve.output)")
        }
    }
}
