import Foundation
public import PushFleetCore
package import PushFleetMetrics
public import PushFleetResults
import PushFleetEngine

/// Joins the shards of a run into one result: their tapes replayed into one recorder on one
/// time line (``Recorder/replaying(_:plan:layouts:wallStart:)``), the ledger judged over all of
/// them, the thresholds judged on the whole. A shard that is missing, did not finish, or whose
/// tape is cut or damaged is named, and the result is marked aborted: it never passes.
public enum ShardMerge {
    /// Shard folders that cannot be one run (invalid input).
    public struct Problem: Error, CustomStringConvertible {
        public var description: String
    }

    /// How far apart the shards of one run may have started.
    static let clockReach: Int64 = 86_400 * 1_000_000_000

    /// One shard folder as read.
    public struct Loaded: Sendable {
        public var folder: String
        public var manifest: ShardManifest
        /// The tape's bytes; nil when it could not be read (``tapeProblem``).
        public var tape: [UInt8]?
        /// The tape's header, read once when the tape is.
        package var header: EventTape.Header?
        public var tapeProblem: String?
    }

    /// What the merge made of each shard, for the caller to show.
    public struct ShardLine: Sendable {
        public var shard: String
        public var status: String
        public var events: Int
        public var tapeBytes: Int
        public var peakResidentBytes: UInt64?
        public var problem: String?
    }

    /// The folders of the shards: each given folder that holds a `shard.json`, and each
    /// `shard-I-of-K` folder inside a given folder that does not (a run's shared folder).
    public static func folders(_ given: [String]) throws(Problem) -> [String] {
        var folders: [String] = []
        let manager = FileManager.default
        for path in given {
            var isFolder: ObjCBool = false
            guard manager.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue else {
                throw Problem(description: "\(path): no such folder")
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
                throw Problem(description: "\(path): neither a shard folder (no \(ShardManifest.fileName)) nor a folder of finished shard-I-of-K folders")
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
                throw Problem(description: "\(path): cannot be read (a shard that never started writes none; name the run's folder to have it counted as missing)")
            }
            let manifest: ShardManifest
            do { manifest = try JSONDecoder().decode(ShardManifest.self, from: data) } catch {
                throw Problem(description: "\(path): not a shard's manifest (\(error))")
            }
            guard manifest.format == ShardManifest.currentFormat else {
                throw Problem(description: "\(path): manifest format \(manifest.format); this pushfleet reads format \(ShardManifest.currentFormat)")
            }
            guard manifest.shard != nil else { throw Problem(description: "\(path): shard \(manifest.index)/\(manifest.count) is not a shard") }
            var entry = Loaded(folder: folder, manifest: manifest)
            // Always the folder's own tape: the manifest's file name is not a path to follow.
            let tapePath = (folder as NSString).appendingPathComponent(EventTape.fileName)
            if let data = FileManager.default.contents(atPath: tapePath) {
                let bytes = Array(data)
                do {
                    let header = try EventTapeReader.header(of: bytes)
                    if header.runID != manifest.runID || header.shard.index != manifest.index || header.shard.count != manifest.count {
                        entry.tapeProblem = "its tape is of run \(header.runID) shard \(header.shard), not of the manifest's"
                    } else {
                        entry.tape = bytes
                        entry.header = header
                    }
                } catch {
                    entry.tapeProblem = bytes.isEmpty ? "its event tape is empty: it recorded nothing" : error.description
                }
            } else {
                entry.tapeProblem = "no event tape (\(tapePath))"
            }
            loaded.append(entry)
        }
        return loaded
    }

    /// Checks that the shards are parts of one run and returns its shard count.
    public static func check(_ shards: [Loaded]) throws(Problem) -> Int {
        guard let first = shards.first else { throw Problem(description: "no shard folders given") }
        var seen: [Int: String] = [:]
        for shard in shards {
            let manifest = shard.manifest
            guard manifest.runID == first.manifest.runID, manifest.count == first.manifest.count else {
                throw Problem(
                    description: "\(shard.folder) is shard \(manifest.index)/\(manifest.count) of run \(manifest.runID), \(first.folder) of run \(first.manifest.runID) with \(first.manifest.count) shards: not one run"
                )
            }
            guard manifest.scenarioText == first.manifest.scenarioText, manifest.overrides == first.manifest.overrides else {
                throw Problem(description: "\(shard.folder) played another scenario (or other values beside it) than \(first.folder)")
            }
            if let other = seen[manifest.index] { throw Problem(description: "shard \(manifest.index) appears twice: \(other) and \(shard.folder)") }
            seen[manifest.index] = shard.folder
        }
        return first.manifest.count
    }

    /// The merged result. `scenario` is the shards' scenario as loaded (from their manifest's
    /// text and overrides); `version` names this build.
    public static func merge(_ shards: [Loaded], scenario: Scenario, version: String) throws(Problem) -> (RunResult, [ShardLine]) {
        let count = try check(shards)
        var ordered = shards.sorted { $0.manifest.index < $1.manifest.index }
        let runID = ordered[0].manifest.runID
        let plan = FleetPlan(scenario: scenario, runID: runID)
        var problems: [String] = []
        let present = Set(ordered.map(\.manifest.index))
        let missing = (0..<count).filter { !present.contains($0) }
        if !missing.isEmpty {
            problems.append("shard\(missing.count == 1 ? "" : "s") \(missing.map { "\($0)/\(count)" }.joined(separator: ", ")) missing")
        }
        // Shards of one run started within a day of each other; a tape whose clock says
        // otherwise would stretch the run's time line, and is left out, named.
        let origins = ordered.compactMap(\.header?.originWall).sorted()
        if !origins.isEmpty {
            let median = origins[origins.count / 2]
            for index in ordered.indices {
                guard let origin = ordered[index].header?.originWall else { continue }
                let off = Saturating.subtract(origin, median)
                if off > Self.clockReach || off < -Self.clockReach {
                    ordered[index].tape = nil
                    ordered[index].header = nil
                    ordered[index].tapeProblem = "its tape's clock is \(off / 1_000_000_000) s off the other shards'"
                }
            }
        }
        let usable = ordered.filter { $0.tape != nil }
        let headers = usable.compactMap(\.header)
        let wallStart = headers.map(\.originWall).min() ?? WallClock.nanoseconds()
        // Pushes of sends whose shard is not replayed cannot be judged: not misdelivered, unknown.
        let replayedShards = Set(usable.map(\.manifest.index))
        let (recorder, replayed) = Recorder.replaying(
            usable.compactMap(\.tape), plan: plan, layouts: scenario.api?.receive.layouts ?? [:], wallStart: wallStart, horizon: scenario.horizon,
            sendMissing: { id in !replayedShards.contains(Shard.index(ofSend: id, count: count)) }
        )
        if replayedShards.count < count {
            problems.append("pairs of the sends and devices of shards not replayed are not judged")
        }
        var lines: [ShardLine] = []
        for shard in ordered {
            let manifest = shard.manifest
            let tape = replayed.first { $0.header.shard.index == manifest.index }
            var problem: String?
            if manifest.status != .completed {
                problem = "\(manifest.status.rawValue)" + (manifest.reason.map { ": \($0)" } ?? "")
            } else if let tapeProblem = shard.tapeProblem {
                problem = tapeProblem
            } else if let failure = manifest.tape?.failure {
                problem = failure
            } else if let damage = tape?.damage {
                problem = damage
            } else if tape?.truncated == true {
                problem = "its tape was cut short"
            } else if let written = manifest.tape?.events, let read = tape?.events, written != read {
                problem = "its tape holds \(read) events of the \(written) it recorded"
            }
            if let problem { problems.append("shard \(manifest.index)/\(count) \(problem)") }
            lines.append(
                ShardLine(
                    shard: "\(manifest.index)/\(count)", status: manifest.status.rawValue, events: tape?.events ?? 0, tapeBytes: shard.tape?.count ?? 0,
                    peakResidentBytes: manifest.peakResidentBytes, problem: problem
                )
            )
        }
        let info = mergedInfo(ordered, headers: headers, wallStart: wallStart, runID: runID, version: version, problems: problems)
        var builder = ResultBuilder(scenario: scenario, plan: plan, recorder: recorder)
        let generators = ordered.compactMap(\.manifest.generator)
        builder.generatorLoad = .init(
            eventLag: Int64((generators.map(\.eventLagMs).max() ?? 0) * 1e6), cpuCores: generators.compactMap(\.cpuCores).max(),
            cores: generators.first?.cores ?? 0,
            // The shards share one push service: the busiest reading of it stands for the run.
            pushService: generators.compactMap(\.pushService).max { $0.busiestLoopShare < $1.busiestLoopShare }
        )
        var result = builder.build(info: info)
        // A shard that was its own limit makes the whole inconclusive, whatever the others did.
        for shard in ordered {
            guard let generator = shard.manifest.generator, generator.bound else { continue }
            let limits = generator.limits.map { "shard \(shard.manifest.index)/\(count): \($0)" }
            if var merged = result.generator {
                merged.limits += limits.filter { !merged.limits.contains($0) }
                result.generator = merged
            }
        }
        return (result, lines)
    }

    /// The run as a whole: from the first shard's start to the last one's end, on the merged
    /// time line (second 0 is the earliest shard's start).
    private static func mergedInfo(
        _ shards: [Loaded], headers: [EventTape.Header], wallStart: Int64, runID: String, version: String, problems: [String]
    ) -> RunResult.Info {
        let first = shards[0].manifest
        func offset(_ index: Int) -> Double {
            guard let header = headers.first(where: { $0.shard.index == index }) else { return 0 }
            return Double(header.originWall - wallStart) / 1e9
        }
        let infos = shards.compactMap { shard in shard.manifest.info.map { (shard.manifest.index, $0) } }
        var info =
            infos.first?.1
            ?? RunResult.Info(
                tool: "pushfleet", version: version, runID: runID, scenario: "", scenarioFile: first.scenarioFile, scenarioText: first.scenarioText,
                seed: 0, target: "", backendURL: "", pushServiceURL: "", host: "", cores: 0, memoryBytes: 0, os: "",
                startedAt: FleetRunner.iso(wallStart), endedAt: FleetRunner.iso(wallStart), durationSeconds: 0, aborted: true, abortReason: nil,
                trafficStartSecond: 0, trafficEndSecond: 0
            )
        info.version = version
        info.runID = runID
        info.startedAt = FleetRunner.iso(wallStart)
        info.endedAt = infos.map(\.1.endedAt).max() ?? info.endedAt
        info.durationSeconds = infos.map { offset($0.0) + $0.1.durationSeconds }.max() ?? 0
        info.trafficStartSecond = infos.map { offset($0.0) + $0.1.trafficStartSecond }.min() ?? 0
        info.trafficEndSecond = infos.map { offset($0.0) + $0.1.trafficEndSecond }.max() ?? 0
        let hosts = Array(Set(infos.map(\.1.host))).sorted()
        info.host = "\(hosts.joined(separator: ", ")) (\(shards.count) of \(first.count) shards)"
        let reasons = problems + infos.compactMap { index, info in info.abortReason.map { "shard \(index)/\(first.count): \($0)" } }
        info.aborted = !problems.isEmpty || infos.contains { $0.1.aborted }
        info.abortReason = reasons.isEmpty ? nil : reasons.joined(separator: "; ")
        return info
    }
}
