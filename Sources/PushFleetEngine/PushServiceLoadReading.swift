import Foundation
import NIOCore
import NIOHTTP1
import PushFleetClients
import PushFleetCore
import PushFleetResults
import PushFleetWire

/// The push service's event loops as its `/admin/stats` gives them. Read as the traffic starts
/// and as it ends, the difference is what the service's loops did over the traffic.
struct PushServiceLoadReading: Sendable, Equatable {
    let loops: [LoopLoad]
    var process: ProcessLoad? = nil

    /// Bounds on what a push service may report, checked where a reading enters: beyond them
    /// (a broken or hostile service) the run makes no claim, and the arithmetic below cannot
    /// overflow (1,024 loops of 2^52 ns, about 52 days of uptime, sum within Int64).
    static let maxLoops = 1_024
    static let maxNanoseconds: Int64 = 1 << 52
    static let maxChecks = 1 << 40
    static let maxCores = 4_096
    /// A reading as the traffic starts and as it ends: 3 tries of 5 s.
    static let timeout = Duration.seconds(5)
    static let attempts = 3

    init(loops: [LoopLoad], process: ProcessLoad? = nil) {
        self.loops = loops
        self.process = process
    }

    /// nil when `stats` gives no loops or a value out of range.
    init?(stats: PushServiceStats) {
        guard let loops = stats.loops, (1...Self.maxLoops).contains(loops.count) else { return nil }
        let nanoseconds = 0...Self.maxNanoseconds
        let counts = 0...Self.maxChecks
        for loop in loops {
            guard nanoseconds.contains(loop.wallNanoseconds), nanoseconds.contains(loop.cpuNanoseconds), nanoseconds.contains(loop.lateNanoseconds),
                counts.contains(loop.checks), counts.contains(loop.lateChecks), loop.waitNanoseconds.map(nanoseconds.contains) ?? true
            else { return nil }
        }
        if let process = stats.process {
            guard nanoseconds.contains(process.cpuNanoseconds), nanoseconds.contains(process.wallNanoseconds),
                (1...Self.maxCores).contains(process.cores)
            else { return nil }
        }
        self.init(loops: loops, process: stats.process)
    }

    /// What the push service answered when asked for its load.
    enum Answer: Sendable, Equatable {
        case reading(PushServiceLoadReading)
        /// An answer without loops, or with values out of range: not pushfleet's push service,
        /// an older one, or a broken one. The run makes no claim about it.
        case unsaid
        /// No answer in time, however often asked.
        case silent

        var reading: PushServiceLoadReading? {
            if case .reading(let reading) = self { reading } else { nil }
        }
    }

    /// Asks `/admin/stats` up to `attempts` times, each within `timeout`; one that answers at all
    /// ends the asking.
    static func read(_ system: SystemUnderTest, clock: any RunClock, timeout: Duration = .seconds(2), attempts: Int = 1) async -> Answer {
        let admin = BackendClient(baseURL: system.pushService, connections: 1, clock: clock)
        var answer = Answer.silent
        for _ in 0..<max(1, attempts) {
            let exchanged = await admin.exchange(.GET, "/admin/stats", authorization: system.pushAdminToken.map { "Bearer \($0)" }, timeout: timeout)
            guard case .success(let exchange) = exchanged else { continue }
            if exchange.status == 200, let stats = try? JSONDecoder().decode(PushServiceStats.self, from: Data(exchange.body.readableBytesView)),
                let reading = PushServiceLoadReading(stats: stats)
            {
                answer = .reading(reading)
            } else {
                answer = .unsaid
            }
            break
        }
        await admin.shutdown()
        return answer
    }

    /// From `earlier` to this reading; nil when they are not of the same loops (the service
    /// restarted) or no check fell between them. A push service in the fleet's own process gives
    /// no process figures (its CPU is the fleet's, judged as such); one in another process says
    /// whether it shares the fleet's machine.
    func since(
        _ earlier: PushServiceLoadReading, inFleetProcess: Bool = false, onFleetMachine: Bool = false
    ) -> RunResult.Generator.PushServiceLoad? {
        guard loops.count == earlier.loops.count else { return nil }
        var spans: [LoopLoad] = []
        for (now, then) in zip(loops, earlier.loops) {
            guard let span = now.since(then) else { return nil }
            spans.append(span)
        }
        let checks = spans.reduce(0) { $0 + $1.checks }
        guard checks > 0 else { return nil }
        let late = spans.reduce(0) { $0 + $1.lateChecks }
        let lateNanoseconds = spans.reduce(Int64(0)) { $0 + $1.lateNanoseconds }
        let timed = spans.filter { $0.wallNanoseconds > 0 }
        let busiest = timed.map { min(1, Double($0.cpuNanoseconds) / Double($0.wallNanoseconds)) }.max() ?? 0
        var load = RunResult.Generator.PushServiceLoad(
            loops: spans.count, busiestLoopShare: busiest, checks: checks, lateChecks: late,
            lateThresholdMs: Double(LoopLoad.lateThreshold) / 1e6, meanLateMs: late > 0 ? Double(lateNanoseconds) / Double(late) / 1e6 : 0
        )
        // Running or waiting for a core: how much of the time a loop wanted one.
        if !timed.isEmpty, timed.allSatisfy({ $0.waitNanoseconds != nil }) {
            load.busiestLoopDemand = timed.map { min(1, Double($0.cpuNanoseconds + $0.waitNanoseconds!) / Double($0.wallNanoseconds)) }.max()
        }
        if !inFleetProcess, let now = process, let then = earlier.process, let share = now.coreShare(since: then) {
            load.processCoreShare = share
            load.processCores = now.cores
            load.processOnFleetMachine = onFleetMachine
        }
        return load
    }
}
