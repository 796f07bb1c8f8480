import Foundation
import PushFleetReport
import PushFleetResults
import PushFleetTestSupport
import Testing

/// `run` reads its scenario file once and reports exactly what it read.
@Suite("Command line: the scenario as given")
struct RunSourceCLITests {
    @Test("the run's provenance is the file's text as read, with --seed applied before the fleet is planned")
    func provenance() async throws {
        try await RunGate.exclusive {
            let directory = try CLITests.temporaryDirectory()
            let text = "# kept as written, comments and all\n" + CLITests.scenario(traffic: "1s", deadline: "30s")
            try text.write(to: directory.appendingPathComponent("given.yaml"), atomically: true, encoding: .utf8)
            let outcome = try await CLITests.run(["run", "given.yaml", "--seed", "42", "--out", "report", "--quiet"], in: directory)
            #expect(outcome.status == 0, "\(outcome.output)")
            let result = try ReportFiles.decodeRunJSON(Data(contentsOf: directory.appendingPathComponent("report/run.json")))
            #expect(result.info.scenarioFile == "given.yaml")
            #expect(result.info.scenarioText == text)
            #expect(result.info.seed == 42)
        }
    }

    @Test("hostile overrides are refused with exit 2 before anything runs: a seed out of range or not a number, --hub against an external backend")
    func hostileOverrides() async throws {
        let directory = try CLITests.temporaryDirectory()
        try CLITests.scenario(traffic: "1s").write(to: directory.appendingPathComponent("given.yaml"), atomically: true, encoding: .utf8)
        for seed in ["-1", "18446744073709551616", "1e3", "0x10", "", "4 2"] {
            let outcome = try await CLITests.run(["run", "given.yaml", "--seed", seed, "--out", "report", "--quiet"], in: directory)
            #expect(outcome.status == 2, "--seed '\(seed)': \(outcome.output)")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("report").path), "--seed '\(seed)'")
        }
        let external = "name: ext\ntarget: { backend: \"http://127.0.0.1:9\", pns: \"http://127.0.0.1:9\" }\nfleet: { users: 1 }\n"
        try external.write(to: directory.appendingPathComponent("external.yaml"), atomically: true, encoding: .utf8)
        let outcome = try await CLITests.run(["run", "external.yaml", "--hub", "--out", "report", "--quiet"], in: directory)
        #expect(outcome.status == 2, "\(outcome.output)")
        #expect(outcome.output.contains("--hub"), "\(outcome.output)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("report").path))
    }
}
