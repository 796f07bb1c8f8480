import Foundation
import PushFleetCore
import PushFleetLauncher
import PushFleetMetrics
import PushFleetScenario

/// A sharded run followed while its shards play (`merge --follow`, `shards --local --live`):
/// each look reads what the run's folder holds — the scenario a shard recorded as it started
/// (`shard.playing.json`), the barrier marks, each tape as far as it is written, the manifests
/// of the shards that ended — and replays the tapes as the merge does (one recorder, one time
/// line), so the live page's frame of the whole run comes from the merge's own replay. The
/// final merge, once every shard has ended, is the exact one and is unchanged.
final class ShardFollower: @unchecked Sendable {
    let root: String
    let window: Duration
    /// Set by the first look that finds a shard's scenario.
    private(set) var scenario: Scenario?
    private(set) var plan: FleetPlan?
    private(set) var count = 0
    private var runID = ""
    private var cursor = ResultBuilder.LiveCursor()
    /// When the next replay is due (monotonic ns), the last frame replayed, and each shard's
    /// events as of it.
    private var nextReplay = Int64.min
    private var last: LiveFrame?
    private var events: [Int: Int] = [:]

    init(root: String, window: Duration) {
        self.root = root
        self.window = window
    }

    /// Every shard folder's state, and the merged frame when a replay was due; `ended` once
    /// every shard has written `shard.json`. The replay is made no sooner than twenty times
    /// what the last one took, so following takes at most a twentieth of a core.
    func look(force: Bool = false) -> (frame: LiveFrame?, ended: Bool) {
        let folders = shardFolders()
        if scenario == nil { load(folders) }
        guard let scenario, let plan, count > 0 else { return (nil, false) }
        var states: [LiveFrame.ShardState] = []
        guard let first = try? Shard(index: 0, count: count) else { return (nil, false) }
        let barrier = ShardBarrierFolder(folder: (root as NSString).appendingPathComponent(".barrier-\(runID)"), shard: first)
        let (starts, traffic) = (barrier.marks("start"), barrier.marks("traffic"))
        for index in 0..<count {
            var state = Self.state(index, folder: folder(index), starts: starts, traffic: traffic, count: count)
            state.events = events[index] ?? 0
            states.append(state)
        }
        let ended = states.allSatisfy { ["done", "stopped", "failed"].contains($0.state) }
        // Between replays the shards' states are new and the counts are the last replay's.
        guard force || ended || MonotonicClock.nanoseconds() >= nextReplay else {
            var frame = last ?? LiveFrame.empty(devices: plan.devices.count)
            (frame.seconds, frame.markers, frame.judged, frame.shards) = ([], [], nil, states)
            return (frame, ended)
        }
        // The tapes are read only for a replay: each is the whole run so far.
        var tapes: [[UInt8]] = []
        var headers: [EventTape.Header] = []
        for index in 0..<count {
            guard let data = FileManager.default.contents(atPath: (folder(index) as NSString).appendingPathComponent(EventTape.fileName)) else { continue }
            let bytes = Array(data)
            guard let header = try? EventTapeReader.header(of: bytes), header.runID == runID else { continue }
            tapes.append(bytes)
            headers.append(header)
        }
        guard !tapes.isEmpty else {
            var frame = LiveFrame.empty(devices: plan.devices.count)
            frame.shards = states
            return (frame, ended)
        }
        let began = MonotonicClock.nanoseconds()
        let wallStart = headers.map(\.originWall).min() ?? WallClock.nanoseconds()
        let replayed = Set(headers.map(\.shard.index))
        let (recorder, replays) = Recorder.replaying(
            tapes, plan: plan, layouts: scenario.api?.receive.layouts ?? [:], wallStart: wallStart, horizon: scenario.horizon,
            sendMissing: { [count] id in !replayed.contains(Shard.index(ofSend: id, count: count)) }
        )
        for replay in replays where replay.header.shard.index < states.count {
            events[replay.header.shard.index] = replay.events
            states[replay.header.shard.index].events = replay.events
        }
        let builder = ResultBuilder(scenario: scenario, plan: plan, recorder: recorder)
        let now = WallClock.nanoseconds() - wallStart
        let trafficStart = recorder.firstMarker("traffic starts")
        let phase = ended ? "done" : states.contains { $0.state == "in traffic" } ? "traffic" : trafficStart == nil ? "arriving" : "draining"
        var frame = builder.liveFrame(now: now, phase: phase, eventLag: 0, cursor: &cursor)
        // Judged with every replay: the replay's own cadence bounds both.
        if let trafficStart { frame.judged = builder.liveJudgement(now: now, trafficStart: trafficStart, window: window) }
        frame.shards = states
        last = frame
        let end = MonotonicClock.nanoseconds()
        nextReplay = end + max(900_000_000, 20 * (end - began))
        return (frame, ended)
    }

    private func folder(_ index: Int) -> String {
        (root as NSString).appendingPathComponent("shard-\(index)-of-\(count)")
    }

    /// The opening event of the followed run, once a shard has said its scenario.
    func hello() -> (scenario: Scenario, plan: FleetPlan)? {
        guard let scenario, let plan else { return nil }
        return (scenario, plan)
    }

    private func shardFolders() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).filter { Shard(folderName: Substring($0)) != nil }.sorted()
            .map { (root as NSString).appendingPathComponent($0) }
    }

    /// The shards' scenario as the merge will load it: from a shard's own record of it.
    private func load(_ folders: [String]) {
        for folder in folders {
            guard let data = FileManager.default.contents(atPath: (folder as NSString).appendingPathComponent(ShardPlaying.fileName)),
                let playing = try? JSONDecoder().decode(ShardPlaying.self, from: data), (1...Shard.maxCount).contains(playing.count)
            else { continue }
            let overrides = ScenarioOverrides(
                seed: playing.overrides.seed, hub: playing.overrides.hub,
                target: playing.overrides.backend.flatMap { backend in playing.overrides.pushService.map { (backend, $0) } }
            )
            guard let loaded = try? ScenarioLoader.load(text: playing.scenarioText, file: playing.scenarioFile, overrides: overrides).scenario else {
                continue
            }
            scenario = loaded
            plan = FleetPlan(scenario: loaded, runID: playing.runID)
            count = playing.count
            runID = playing.runID
            return
        }
    }

    /// Where a shard is: its manifest if it ended, else its barrier marks, else whether it began.
    static func state(
        _ index: Int, folder: String, starts: [Int: ShardBarrier.Mark], traffic: [Int: ShardBarrier.Mark], count: Int
    ) -> LiveFrame.ShardState {
        if let data = FileManager.default.contents(atPath: (folder as NSString).appendingPathComponent(ShardManifest.fileName)),
            let manifest = try? JSONDecoder().decode(ShardManifest.self, from: data)
        {
            let state = manifest.status == .completed ? "done" : manifest.status == .interrupted ? "stopped" : "failed"
            return .init(index: index, state: state, reason: manifest.reason)
        }
        func allReady(_ marks: [Int: ShardBarrier.Mark]) -> Bool {
            (0..<count).allSatisfy { if case .ready = marks[$0] { true } else { false } }
        }
        switch (starts[index], traffic[index]) {
        case (_, .failed(let reason)?), (.failed(let reason)?, _): return .init(index: index, state: "failed", reason: reason)
        case (_, .ready?): return .init(index: index, state: allReady(traffic) ? "in traffic" : "waiting at the traffic barrier")
        case (.ready?, nil): return .init(index: index, state: allReady(starts) ? "arriving" : "waiting at the start barrier")
        case (nil, nil):
            let began = FileManager.default.fileExists(atPath: (folder as NSString).appendingPathComponent(ShardPlaying.fileName))
            return .init(index: index, state: began ? "starting" : "not started")
        }
    }
}
