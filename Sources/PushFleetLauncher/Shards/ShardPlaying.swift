import Foundation

/// `shard.playing.json`: written by a shard as it starts, before any barrier, so that a run
/// followed while it plays (`merge --follow`, `shards --local --live`) knows its scenario and
/// its part before `shard.json` says how it ended.
public struct ShardPlaying: Codable, Sendable, Equatable {
    public static let fileName = "shard.playing.json"

    public var runID: String
    public var index: Int
    public var count: Int
    public var scenarioFile: String
    public var scenarioText: String
    public var overrides: ShardManifest.Overrides

    public init(_ manifest: ShardManifest) {
        runID = manifest.runID
        index = manifest.index
        count = manifest.count
        scenarioFile = manifest.scenarioFile
        scenarioText = manifest.scenarioText
        overrides = manifest.overrides
    }
}
