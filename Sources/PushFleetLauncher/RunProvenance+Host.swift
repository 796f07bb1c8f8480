public import PushFleetEngine
import Foundation
public import Logging

extension RunProvenance.Host {
    /// This machine, as the reports name it.
    public static func current() -> Self {
        let info = ProcessInfo.processInfo
        return Self(name: info.hostName, cores: info.activeProcessorCount, memoryBytes: info.physicalMemory, os: info.operatingSystemVersionString)
    }
}

extension FleetRunner.Options {
    /// Options for a run on this machine: the host is gathered here, where process state may be read.
    public init(
        scenarioFile: String, scenarioText: String, version: String, logger: Logger, progress: (@Sendable (String) -> Void)? = nil
    ) {
        self.init(
            provenance: RunProvenance(scenarioFile: scenarioFile, scenarioText: scenarioText, version: version, host: .current()),
            logger: logger, progress: progress
        )
    }
}
