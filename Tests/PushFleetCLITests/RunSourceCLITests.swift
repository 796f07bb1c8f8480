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
            let text = "# kept as written, comments and all\n" + CLITests.scenario(traffic: "1s")
            try text.write(to: directory.appendingPathComponent("given.yaml"), atomically: true, encoding: .utf8)
            let outcome = try await CLITests.run(["run", "given.yaml", "--seed", "42", "--out", "report", "--quiet"], in: directory)
            #expect(outcome.status == 0, "\(outcome.output)")
            let result = try ReportFiles.decodeRunJSON(Data(contentsOf: directory.appendingPathComponent("report/run.json")))
            #expect(result.info.scenarioFile == "given.yaml")
            #expect(result.info.scenarioText == text)
            #expect(result.info.seed == 42)
        }
    }
}
