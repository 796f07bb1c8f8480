import Logging
import PushFleetEngine
import PushFleetLauncher

extension FleetRunner.Options {
    /// A bench's run: warnings only, progress on standard error, the bench's scenario text recorded.
    static func bench(_ yaml: String) -> Self {
        var logger = Logger(label: "pushfleet.bench")
        logger.logLevel = .warning
        return Self(scenarioFile: "bench", scenarioText: yaml, version: PushFleetVersion.current, logger: logger) {
            FileHandleOutput.standardError($0)
        }
    }
}
