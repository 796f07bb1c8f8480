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
        public var tapeIssue: ShardIssue?
    }

    /// What the merge made of each shard, for the caller to show.
    public struct ShardLine: Sendable {
        public var shard: String
        public var status: String
        public var events: Int
        public var tapeBytes: Int
        public var peakResidentBytes: UInt64?
        public var issue: ShardIssue?
        public var problem: String? { issue?.description }
    }

    /// The merged result. `scenario` is the shards' scenario as loaded (from their manifest's
    /// text and overrides); `version` names this build.
    public static func merge(_ shards: [Loaded], scenario: Scenario, version: String) throws(Problem) -> (RunResult, [ShardLine]) {
        let count = try check(shards)
        var ordered = shards.sorted { $0.manifest.index < $1.manifest.index }
        let runID = ordered[0].manifest.runID
        let plan = FleetPlan(scenario: scenario, runID: runID)
        var problems = missingShards(ordered, count: count)
        setAsideClockOutliers(&ordered)
        let replay = replay(ordered, scenario: scenario, plan: plan, count: count)
        if replay.shards < count { problems.append(.notJudged) }
        let lines = ordered.map { shardLine($0, replayed: replay.tapes, count: count) }
        problems += zip(ordered, lines).compactMap { shard, line in line.issue.map { .shard(index: shard.manifest.index, count: count, $0) } }
        let info = mergedInfo(
            ordered, headers: replay.headers, wallStart: replay.wallStart, runID: runID, version: version, problems: problems.map(\.description)
        )
        return (judge(ordered, recorder: replay.recorder, scenario: scenario, plan: plan, info: info, count: count), lines)
    }

    /// Shards of the run's count that no folder holds.
    static func missingShards(_ shards: [Loaded], count: Int) -> [MergeProblem] {
        let present = Set(shards.map(\.manifest.index))
        let missing = (0..<count).filter { !present.contains($0) }
        return missing.isEmpty ? [] : [.missing(indices: missing, count: count)]
    }

    /// Shards of one run started within a day of each other; a tape whose clock says otherwise
    /// would stretch the run's time line, and is left out, named.
    static func setAsideClockOutliers(_ shards: inout [Loaded]) {
        let origins = shards.compactMap(\.header?.originWall).sorted()
        guard !origins.isEmpty else { return }
        let median = origins[origins.count / 2]
        for index in shards.indices {
            guard let origin = shards[index].header?.originWall else { continue }
            let off = Saturating.subtract(origin, median)
            if off > Self.clockReach || off < -Self.clockReach {
                shards[index].tape = nil
                shards[index].header = nil
                shards[index].tapeIssue = .clockOff(seconds: off / 1_000_000_000)
            }
        }
    }

    /// The usable tapes replayed into one recorder on one time line.
    struct Replay {
        var recorder: Recorder
        var tapes: [Recorder.ReplayedTape]
        var headers: [EventTape.Header]
        var wallStart: Int64
        /// How many shards were replayed.
        var shards: Int
    }

    static func replay(_ shards: [Loaded], scenario: Scenario, plan: FleetPlan, count: Int) -> Replay {
        let usable = shards.filter { $0.tape != nil }
        let headers = usable.compactMap(\.header)
        let wallStart = headers.map(\.originWall).min() ?? WallClock.nanoseconds()
        // Pushes of sends whose shard is not replayed cannot be judged: not misdelivered, unknown.
        let replayedShards = Set(usable.map(\.manifest.index))
        let (recorder, tapes) = Recorder.replaying(
            usable.compactMap(\.tape), plan: plan, layouts: scenario.api?.receive.layouts ?? [:], wallStart: wallStart, horizon: scenario.horizon,
            sendMissing: { id in !replayedShards.contains(Shard.index(ofSend: id, count: count)) }
        )
        return Replay(recorder: recorder, tapes: tapes, headers: headers, wallStart: wallStart, shards: replayedShards.count)
    }

    /// What the merge made of one shard: its first issue, in the order a reader would look.
    static func shardLine(_ shard: Loaded, replayed: [Recorder.ReplayedTape], count: Int) -> ShardLine {
        let manifest = shard.manifest
        let tape = replayed.first { $0.header.shard.index == manifest.index }
        var issue: ShardIssue?
        if manifest.status != .completed {
            issue = .ended(status: manifest.status.rawValue, reason: manifest.reason)
        } else if let tapeIssue = shard.tapeIssue {
            issue = tapeIssue
        } else if let failure = manifest.tape?.failure {
            issue = .tapeFailure(failure)
        } else if let damage = tape?.damage {
            issue = .damagedTape(damage)
        } else if tape?.truncated == true {
            issue = .cutTape
        } else if let written = manifest.tape?.events, let read = tape?.events, written != read {
            issue = .eventCount(read: read, written: written)
        }
        return ShardLine(
            shard: "\(manifest.index)/\(count)", status: manifest.status.rawValue, events: tape?.events ?? 0, tapeBytes: shard.tape?.count ?? 0,
            peakResidentBytes: manifest.peakResidentBytes, issue: issue
        )
    }

    /// The thresholds and the generator judged on the whole. A shard that was its own limit
    /// makes the whole inconclusive, whatever the others did.
    static func judge(_ shards: [Loaded], recorder: Recorder, scenario: Scenario, plan: FleetPlan, info: RunResult.Info, count: Int) -> RunResult {
        var builder = ResultBuilder(scenario: scenario, plan: plan, recorder: recorder)
        let generators = shards.compactMap(\.manifest.generator)
        // The shards share one push service: the busiest reading of it stands for the run, with
        // the most any shard saw its loops want a core.
        let readings = generators.compactMap(\.pushService)
        var pushService = readings.max { $0.busiestLoopShare < $1.busiestLoopShare }
        pushService?.busiestLoopDemand = readings.compactMap(\.busiestLoopDemand).max()
        builder.generatorLoad = .init(
            eventLag: Int64((generators.map(\.eventLagMs).max() ?? 0) * 1e6), cpuCores: generators.compactMap(\.cpuCores).max(),
            cores: generators.first?.cores ?? 0, pushService: pushService
        )
        // Each fault's window judged over every shard's sends and receipts: the devices each
        // fault touched are the seed's, the same in every shard (docs/sharding.md).
        if scenario.network.hasFaults, info.trafficStartSecond > 0 || info.trafficEndSecond > 0 {
            let faults = NetworkFaultPlan(faults: scenario.network.faults, devices: plan.devices.count, seed: scenario.seed, runID: plan.runID, pid: 0)
            builder.networkFaults = (faults, recorder.start + Int64(info.trafficStartSecond * 1e9))
        }
        var result = builder.build(info: info)
        for shard in shards {
            guard let generator = shard.manifest.generator, generator.bound, var merged = result.generator else { continue }
            let limits = generator.limits.map { "shard \(shard.manifest.index)/\(count): \($0)" }
            merged.limits += limits.filter { !merged.limits.contains($0) }
            result.generator = merged
        }
        return result
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
        info.startedAtNanoseconds = wallStart
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
