public import Foundation
public import PushFleetCore
public import PushFleetResults

/// `shard.json`: what a shard of a run says of itself beside its event tape — which run and
/// part it was, the scenario it played (text and the values given beside it), how it ended,
/// its clock's origin, and what it measured of itself. `pushfleet merge` reads it to replay the
/// tape and to name the shards that are missing or did not finish.
public struct ShardManifest: Codable, Sendable {
    public static let fileName = "shard.json"
    public static let currentFormat = 1

    public enum Status: String, Codable, Sendable {
        /// Played its part to the end.
        case completed
        /// Stopped early (a signal, a shard that never came to the barrier); its tape holds
        /// what it recorded.
        case interrupted
        /// Could not play (the target did not start, the tape could not be written).
        case failed
    }

    /// Values given beside the scenario file.
    public struct Overrides: Codable, Sendable, Equatable {
        public var seed: UInt64?
        public var hub: Bool?
        public var backend: String?
        public var pushService: String?

        public init(seed: UInt64? = nil, hub: Bool? = nil, backend: String? = nil, pushService: String? = nil) {
            self.seed = seed
            self.hub = hub
            self.backend = backend
            self.pushService = pushService
        }
    }

    public struct Tape: Codable, Sendable, Equatable {
        public var file: String
        public var events: Int
        public var bytes: Int
        /// Why writing stopped early, when it did.
        public var failure: String?

        public init(file: String, events: Int, bytes: Int, failure: String?) {
            self.file = file
            self.events = events
            self.bytes = bytes
            self.failure = failure
        }
    }

    public var format = Self.currentFormat
    public var runID: String
    public var index: Int
    public var count: Int
    public var status: Status
    public var reason: String?
    public var scenarioFile: String
    public var scenarioText: String
    public var overrides: Overrides
    /// Devices this shard played.
    public var devices: Int
    public var tape: Tape?
    /// The shard's own view of its run (its ledger sees only its part; the merge judges).
    public var info: RunResult.Info?
    public var generator: RunResult.Generator?
    /// The shard process's peak resident memory (VmHWM).
    public var peakResidentBytes: UInt64?

    public init(
        runID: String, shard: Shard, status: Status, reason: String? = nil, scenarioFile: String, scenarioText: String, overrides: Overrides,
        devices: Int
    ) {
        self.runID = runID
        self.index = shard.index
        self.count = shard.count
        self.status = status
        self.reason = reason
        self.scenarioFile = scenarioFile
        self.scenarioText = scenarioText
        self.overrides = overrides
        self.devices = devices
    }

    public var shard: Shard? { try? Shard(index: index, count: count) }

    private enum CodingKeys: String, CodingKey {
        case format, status, reason, overrides, devices, tape, info, generator, index, count
        case runID = "run_id"
        case scenarioFile = "scenario_file"
        case scenarioText = "scenario_text"
        case peakResidentBytes = "peak_resident_bytes"
    }

    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// The run id shards derive when none is given: the same for every shard of one scenario,
    /// seed, shard count and results folder, so identical pods agree without talking.
    public static func derivedRunID(scenarioText: String, seed: UInt64, count: Int, folder: String) -> String {
        let hash = stableHash("\(scenarioText)\u{0}\(seed)\u{0}\(count)\u{0}\(folder)", seed: 0x5A4D)
        let hex = String(hash & 0xFFFF_FFFF_FFFF, radix: 16)
        return String(repeating: "0", count: 12 - hex.count) + hex
    }

}
