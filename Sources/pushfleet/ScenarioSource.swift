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
    /// What the file may not mean as written; never a reason to refuse it.
    let warnings: [ScenarioWarning]

    /// Reads and validates `path` with `overrides` in place of the file's values.
    static func read(_ path: String, overrides: ScenarioOverrides = .init()) throws(ScenarioIssues) -> ScenarioSource {
        let text = try ScenarioLoader.text(ofFile: path)
        let loaded = try ScenarioLoader.load(text: text, file: path, overrides: overrides)
        return ScenarioSource(path: path, text: text, scenario: loaded.scenario, warnings: loaded.warnings)
    }

    /// Prints the warnings on stderr, where the problems would be.
    func printWarnings() {
        for warning in warnings { FileHandleOutput.standardError(warning.description) }
    }

    /// What the reports say a run of it came from: this text, this build, this machine.
    var provenance: RunProvenance {
        RunProvenance(scenarioFile: path, scenarioText: text, version: PushFleet.version, host: .current())
    }

    /// The source, its warnings printed; or its problems on stderr and exit 2.
    static func load(_ path: String, overrides: ScenarioOverrides = .init()) throws -> ScenarioSource {
        do {
            let source = try read(path, overrides: overrides)
            source.printWarnings()
            return source
        } catch {
            FileHandleOutput.standardError(error.description)
            throw ExitCode(ExitStatus.invalidInput)
        }
    }
}
