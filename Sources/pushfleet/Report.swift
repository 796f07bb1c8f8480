import ArgumentParser
import Foundation
import PushFleetCore
import PushFleetLauncher
import PushFleetReport
import PushFleetResults

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Re-render every report file of a run folder from its run.json.")

    @Argument(help: "A run's report folder.") var directory: String
    @Option(help: "Link each incident's trace: a URL with {trace_id} in it (http://jaeger:16686/trace/{trace_id}).") var traceUrl: String?

    func validate() throws {
        if let traceUrl, let problem = TraceURL.check(traceUrl) { throw ValidationError("--trace-url \(problem)") }
    }

    func run() throws {
        let path = (directory as NSString).appendingPathComponent("run.json")
        guard let data = FileManager.default.contents(atPath: path) else {
            FileHandleOutput.standardError("no run.json in \(directory)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        var result: RunResult
        do { result = try ReportFiles.decodeRunJSON(data) } catch {
            FileHandleOutput.standardError("\(path) is not a pushfleet run.json: \(error)")
            throw ExitCode(ExitStatus.invalidInput)
        }
        if let traceUrl { result.info.traceURL = traceUrl }
        try ReportWriter.write(result, to: directory)
        FileHandleOutput.standardOutput("re-rendered: \(directory)")
    }
}
