/// Where a run came from, for its reports: the scenario as the user gave it, the tool's version
/// and the machine. Gathered by the caller (the command line, a benchmark, a test), never by the
/// engine, so the engine reads no process or host state.
public struct RunProvenance: Sendable {
    /// The machine the fleet ran on.
    public struct Host: Sendable, Equatable {
        public var name: String
        public var cores: Int
        public var memoryBytes: UInt64
        public var os: String

        public init(name: String, cores: Int, memoryBytes: UInt64, os: String) {
            self.name = name
            self.cores = cores
            self.memoryBytes = memoryBytes
            self.os = os
        }
    }

    /// The scenario file's path as given (or a name for a scenario built in code).
    public var scenarioFile: String
    /// The scenario's text exactly as it was parsed.
    public var scenarioText: String
    public var version: String
    public var host: Host

    public init(scenarioFile: String, scenarioText: String, version: String, host: Host) {
        self.scenarioFile = scenarioFile
        self.scenarioText = scenarioText
        self.version = version
        self.host = host
    }
}
