import ArgumentParser
import PushFleetCore
import PushFleetEngine
import PushFleetLauncher
import PushFleetScenario

/// A scenario file read once: the validated scenario, and the very text it came from for the
/// run's provenance.
struct ScenarioSource {
    let path: String
    let text: String
    let scenario: Scenario

    /// Reads and validates `path` with `overrides` in place of the file's values.
    static func read(_ path: String, overrides: ScenarioOverrides = .init()) throws(ScenarioIssues) -> ScenarioSource {
        let text = try ScenarioLoader.text(ofFile: path)
        return ScenarioSource(path: path, text: text, scenario: try ScenarioLoader.parse(text, file: path, overrides: overrides))
    }

    /// What the reports say a run of it came from: this text, this build, this machine.
    var provenance: RunProvenance {
        RunProvenance(scenarioFile: path, scenarioText: text, version: PushFleet.version, host: .current())
    }

    /// The source, or its problems on stderr and exit 2.
    static func load(_ path: String, overrides: ScenarioOverrides = .init()) throws -> ScenarioSource {
        do {
            return try read(path, overrides: overrides)
        } catch {
            FileHandleOutput.standardError(error.description)
            throw ExitCode(ExitStatus.invalidInput)
        }
    }
}
