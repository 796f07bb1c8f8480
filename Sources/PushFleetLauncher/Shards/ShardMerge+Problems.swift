import Foundation
import PushFleetResults

extension ShardMerge {
    /// Shard folders that cannot be one run: invalid input, and the merge does not start.
    public enum Problem: Error, CustomStringConvertible, Equatable {
        case noSuchFolder(String)
        case notShardFolder(String)
        case unreadableManifest(path: String)
        case notManifest(path: String, reason: String)
        case manifestFormat(path: String, found: Int)
        case notAShard(path: String, index: Int, count: Int)
        case noFolders
        case otherRun(folder: String, index: Int, count: Int, runID: String, first: String, firstRunID: String, firstCount: Int)
        case otherScenario(folder: String, first: String)
        case twice(index: Int, first: String, second: String)

        public var description: String {
            switch self {
            case .noSuchFolder(let path): "\(path): no such folder"
            case .notShardFolder(let path):
                "\(path): neither a shard folder (no \(ShardManifest.fileName)) nor a folder of finished shard-I-of-K folders"
            case .unreadableManifest(let path):
                "\(path): cannot be read (a shard that never started writes none; name the run's folder to have it counted as missing)"
            case .notManifest(let path, let reason): "\(path): not a shard's manifest (\(reason))"
            case .manifestFormat(let path, let found): "\(path): manifest format \(found); this pushfleet reads format \(ShardManifest.currentFormat)"
            case .notAShard(let path, let index, let count): "\(path): shard \(index)/\(count) is not a shard"
            case .noFolders: "no shard folders given"
            case .otherRun(let folder, let index, let count, let runID, let first, let firstRunID, let firstCount):
                "\(folder) is shard \(index)/\(count) of run \(runID), \(first) of run \(firstRunID) with \(firstCount) shards: not one run"
            case .otherScenario(let folder, let first): "\(folder) played another scenario (or other values beside it) than \(first)"
            case .twice(let index, let first, let second): "shard \(index) appears twice: \(first) and \(second)"
            }
        }
    }

    /// What keeps one shard's part out of the merged run, or makes it partial.
    public enum ShardIssue: Sendable, CustomStringConvertible, Equatable {
        /// The shard ended otherwise than completed (stopped, failed), with its reason.
        case ended(status: String, reason: String?)
        case noTape(path: String)
        case emptyTape
        case unreadableTape(String)
        case tapeOfAnotherRun(runID: String, shard: String)
        case clockOff(seconds: Int64)
        /// The shard said its tape could not be written whole.
        case tapeFailure(String)
        case damagedTape(String)
        case cutTape
        case eventCount(read: Int, written: Int)

        public var description: String {
            switch self {
            case .ended(let status, let reason): status + (reason.map { ": \($0)" } ?? "")
            case .noTape(let path): "no event tape (\(path))"
            case .emptyTape: "its event tape is empty: it recorded nothing"
            case .unreadableTape(let reason): reason
            case .tapeOfAnotherRun(let runID, let shard): "its tape is of run \(runID) shard \(shard), not of the manifest's"
            case .clockOff(let seconds): "its tape's clock is \(seconds) s off the other shards'"
            case .tapeFailure(let failure): failure
            case .damagedTape(let damage): damage
            case .cutTape: "its tape was cut short"
            case .eventCount(let read, let written): "its tape holds \(read) events of the \(written) it recorded"
            }
        }
    }

    /// Why a merged run is partial: it is then marked aborted and never passes.
    public enum MergeProblem: Sendable, CustomStringConvertible, Equatable {
        case missing(indices: [Int], count: Int)
        /// Pairs of sends and devices of shards not replayed cannot be judged.
        case notJudged
        case shard(index: Int, count: Int, ShardIssue)

        public var description: String {
            switch self {
            case .missing(let indices, let count):
                "shard\(indices.count == 1 ? "" : "s") \(indices.map { "\($0)/\(count)" }.joined(separator: ", ")) missing"
            case .notJudged: "pairs of the sends and devices of shards not replayed are not judged"
            case .shard(let index, let count, let issue): "shard \(index)/\(count) \(issue)"
            }
        }
    }
}
