import Foundation
import PushFleetCore
import PushFleetEngine
import PushFleetMetrics

extension ShardMerge {
    /// The folders of the shards: each given folder that holds a `shard.json`, and each
    /// `shard-I-of-K` folder inside a given folder that does not (a run's shared folder).
    public static func folders(_ given: [String]) throws(Problem) -> [String] {
        var folders: [String] = []
        let manager = FileManager.default
        for path in given {
            var isFolder: ObjCBool = false
            guard manager.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue else {
                throw .noSuchFolder(path)
            }
            if manager.fileExists(atPath: (path as NSString).appendingPathComponent(ShardManifest.fileName)) {
                folders.append(path)
                continue
            }
            // A shard folder without its manifest is a shard that never finished: counted missing.
            let inside = ((try? manager.contentsOfDirectory(atPath: path)) ?? []).filter {
                Shard(folderName: Substring($0)) != nil
                    && manager.fileExists(atPath: ((path as NSString).appendingPathComponent($0) as NSString).appendingPathComponent(ShardManifest.fileName))
            }.sorted()
            guard !inside.isEmpty else {
                throw .notShardFolder(path)
            }
            folders += inside.map { (path as NSString).appendingPathComponent($0) }
        }
        return folders
    }

    /// Reads each folder's `shard.json` and tape. A folder without a readable `shard.json` is
    /// an error; a missing or unreadable tape is the shard's problem, named in the result.
    public static func load(_ folders: [String]) throws(Problem) -> [Loaded] {
        var loaded: [Loaded] = []
        for folder in folders {
            let path = (folder as NSString).appendingPathComponent(ShardManifest.fileName)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw .unreadableManifest(path: path)
            }
            let manifest: ShardManifest
            do { manifest = try JSONDecoder().decode(ShardManifest.self, from: data) } catch {
                throw .notManifest(path: path, reason: "\(error)")
            }
            guard manifest.format == ShardManifest.currentFormat else {
                throw .manifestFormat(path: path, found: manifest.format)
            }
            guard manifest.shard != nil else { throw .notAShard(path: path, index: manifest.index, count: manifest.count) }
            var entry = Loaded(folder: folder, manifest: manifest)
            // Always the folder's own tape: the manifest's file name is not a path to follow.
            let tapePath = (folder as NSString).appendingPathComponent(EventTape.fileName)
            if let data = FileManager.default.contents(atPath: tapePath) {
                let bytes = Array(data)
                do {
                    let header = try EventTapeReader.header(of: bytes)
                    if header.runID != manifest.runID || header.shard.index != manifest.index || header.shard.count != manifest.count {
                        entry.tapeIssue = .tapeOfAnotherRun(runID: header.runID, shard: "\(header.shard)")
                    } else {
                        entry.tape = bytes
                        entry.header = header
                    }
                } catch {
                    entry.tapeIssue = bytes.isEmpty ? .emptyTape : .unreadableTape(error.description)
                }
            } else {
                entry.tapeIssue = .noTape(path: tapePath)
            }
            loaded.append(entry)
        }
        return loaded
    }

    /// Checks that the shards are parts of one run and returns its shard count.
    public static func check(_ shards: [Loaded]) throws(Problem) -> Int {
        guard let first = shards.first else { throw .noFolders }
        var seen: [Int: String] = [:]
        for shard in shards {
            let manifest = shard.manifest
            guard manifest.runID == first.manifest.runID, manifest.count == first.manifest.count else {
                throw .otherRun(
                    folder: shard.folder, index: manifest.index, count: manifest.count, runID: manifest.runID, first: first.folder,
                    firstRunID: first.manifest.runID, firstCount: first.manifest.count
                )
            }
            guard manifest.scenarioText == first.manifest.scenarioText, manifest.overrides == first.manifest.overrides else {
                throw .otherScenario(folder: shard.folder, first: first.folder)
            }
            if let other = seen[manifest.index] { throw .twice(index: manifest.index, first: other, second: shard.folder) }
            seen[manifest.index] = shard.folder
        }
        return first.manifest.count
    }
}
