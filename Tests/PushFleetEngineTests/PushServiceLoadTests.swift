import Foundation
import NIOCore
import NIOPosix
import PushFleetCore
@testable import PushFleetEngine
import PushFleetLauncher
import PushFleetLedger
import PushFleetMetrics
import PushFleetReport
import PushFleetResults
import PushFleetTestSupport
import PushFleetWire
import Synchronization
import Testing

/// pushfleet's own push service saturating is pushfleet's limit, never the backend's: the run
/// reads the service's event loops before and after the traffic and says so.
@Suite("Push service load")
struct PushServiceLoadTests {
    static func loop(wall: Int64, cpu: Int64, checks: Int, late: Int = 0, lateNanoseconds: Int64 = 0, wait: Int64? = nil) -> LoopLoad {
        var load = LoopLoad()
        load.waitNanoseconds = wait
        load.wallNanoseconds = wall
        load.cpuNanoseconds = cpu
        load.checks = checks
        load.lateChecks = late
        load.lateNanoseconds = lateNanoseconds
        return load
    }

    @Test("two readings give the busiest loop's share and the late checks between them; a restart or no check gives nothing")
    func readings() throws {
        let before = PushServiceLoadReading(
            loops: [Self.loop(wall: 1_000, cpu: 100, checks: 10), Self.loop(wall: 1_000, cpu: 900, checks: 10)],
            process: ProcessLoad(cpuNanoseconds: 1_000, wallNanoseconds: 1_000, cores: 2)
        )
        let after = PushServiceLoadReading(
            loops: [Self.loop(wall: 3_000, cpu: 1_900, checks: 30, late: 4, lateNanoseconds: 800_000_000), Self.loop(wall: 3_000, cpu: 1_100, checks: 30)],
            process: ProcessLoad(cpuNanoseconds: 3_000, wallNanoseconds: 3_000, cores: 2)
        )
        let load = try #require(after.since(before))
        #expect(load.processCoreShare == 0.5 && load.processCores == 2)
        #expect(load.loops == 2 && load.checks == 40 && load.lateChecks == 4)
        #expect(abs(load.busiestLoopShare - 0.9) < 1e-9)
        #expect(abs(load.meanLateMs - 200) < 1e-9 && load.lateThresholdMs == 100)
        #expect(load.busiestLoopDemand == nil, "no loop said how long it waited")
        #expect(before.since(after) == nil)
        #expect(before.since(before) == nil)
        // With the waits: the loop that ran 40% and waited 55% of the span wanted a core 95%.
        let waitedBefore = PushServiceLoadReading(loops: [Self.loop(wall: 1_000, cpu: 100, checks: 10, wait: 0), Self.loop(wall: 1_000, cpu: 100, checks: 10, wait: 0)])
        let waitedAfter = PushServiceLoadReading(loops: [
            Self.loop(wall: 3_000, cpu: 900, checks: 30, wait: 1_100), Self.loop(wall: 3_000, cpu: 700, checks: 30, wait: 200),
        ])
        let starved = try #require(waitedAfter.since(waitedBefore))
        #expect(abs(starved.busiestLoopShare - 0.4) < 1e-9 && abs(starved.busiestLoopDemand! - 0.95) < 1e-9)
        #expect(after.since(PushServiceLoadReading(loops: [Self.loop(wall: 0, cpu: 0, checks: 0)])) == nil)
    }

    @Test("a reading out of range, from a broken or hostile push service, is none, and no difference overflows; in the fleet's process no process figures")
    func hostileReadings() throws {
        func stats(_ loops: [LoopLoad]?, process: ProcessLoad? = nil) -> PushServiceStats {
            var stats = PushServiceStats()
            stats.loops = loops
            stats.process = process
            return stats
        }
        let fine = Self.loop(wall: 1_000, cpu: 10, checks: 1)
        #expect(PushServiceLoadReading(stats: stats([fine])) != nil)
        #expect(PushServiceLoadReading(stats: stats(nil)) == nil)
        #expect(PushServiceLoadReading(stats: stats([])) == nil)
        #expect(PushServiceLoadReading(stats: stats(Array(repeating: fine, count: 1_025))) == nil)
        for hostile in [
            Self.loop(wall: .max, cpu: 0, checks: 1), Self.loop(wall: 1, cpu: .min, checks: 1), Self.loop(wall: 1, cpu: 0, checks: .max),
            Self.loop(wall: 1, cpu: 0, checks: 1, late: -1), Self.loop(wall: 1, cpu: 0, checks: 1, late: 1, lateNanoseconds: .max),
            Self.loop(wall: 1, cpu: 0, checks: 1, wait: -1), Self.loop(wall: 1, cpu: 0, checks: 1, wait: .max),
        ] {
            #expect(PushServiceLoadReading(stats: stats([fine, hostile])) == nil, "\(hostile)")
        }
        #expect(PushServiceLoadReading(stats: stats([fine], process: ProcessLoad(cpuNanoseconds: 1, wallNanoseconds: 1, cores: 0))) == nil)
        #expect(PushServiceLoadReading(stats: stats([fine], process: ProcessLoad(cpuNanoseconds: .max, wallNanoseconds: 1, cores: 2))) == nil)
        // At the bounds, every difference and sum stays within Int64.
        let top = Self.loop(wall: PushServiceLoadReading.maxNanoseconds, cpu: PushServiceLoadReading.maxNanoseconds, checks: PushServiceLoadReading.maxChecks,
            late: PushServiceLoadReading.maxChecks, lateNanoseconds: PushServiceLoadReading.maxNanoseconds)
        let zero = Self.loop(wall: 0, cpu: 0, checks: 0)
        let high = try #require(PushServiceLoadReading(stats: stats(Array(repeating: top, count: PushServiceLoadReading.maxLoops))))
        let low = try #require(PushServiceLoadReading(stats: stats(Array(repeating: zero, count: PushServiceLoadReading.maxLoops))))
        #expect(high.since(low)?.busiestLoopShare == 1)
        #expect(low.since(high) == nil)
        // A push service in the fleet's process gives no process figures; another says where it runs.
        let before = PushServiceLoadReading(loops: [zero], process: ProcessLoad(cpuNanoseconds: 0, wallNanoseconds: 0, cores: 2))
        let after = PushServiceLoadReading(loops: [fine], process: ProcessLoad(cpuNanoseconds: 500, wallNanoseconds: 1_000, cores: 2))
        #expect(after.since(before, inFleetProcess: true, onFleetMachine: true)?.processCoreShare == nil)
        let beside = try #require(after.since(before, onFleetMachine: true))
        #expect(beside.processCoreShare == 0.25 && beside.processOnFleetMachine == true)
    }

    @Test("a saturated loop, or loops often late, are the generator's limits; a push service that kept up is none")
    func limits() {
        func limits(_ load: RunResult.Generator.PushServiceLoad) -> [String] {
            ResultBuilder.pushServiceLimits(load)
        }
        let calm = RunResult.Generator.PushServiceLoad(loops: 2, busiestLoopShare: 0.4, checks: 200, lateChecks: 3, lateThresholdMs: 100, meanLateMs: 150)
        #expect(limits(calm).isEmpty)
        var saturated = calm
        saturated.busiestLoopShare = 0.95
        #expect(limits(saturated).count == 1 && limits(saturated)[0].hasPrefix("push service saturated: its busiest event loop was busy 95.0%"))
        var late = calm
        late.lateChecks = 40
        #expect(limits(late).count == 1 && limits(late)[0].hasPrefix("push service behind: 40 of its event loops' 200 timer checks (20.0%)"))
        #expect(limits(late)[0].contains("the backend hop includes that wait"))
        var busyProcess = calm
        busyProcess.processCoreShare = 0.93
        busyProcess.processCores = 1
        #expect(limits(busyProcess) == [
            "push service's process saturated: it used 93.0% of its 1 core over the traffic; pushes waited for pushfleet's push service, and the backend hop includes that wait"
        ])
        // The fleet's 0.7 cores and serve's 1.2 on one 2-core machine: together at its limit.
        var beside = calm
        beside.processCoreShare = 0.6
        beside.processCores = 2
        beside.processOnFleetMachine = true
        let shared = ResultBuilder.sharedMachineLimit(fleetCores: 0.7, machineCores: 2, pushService: beside)
        #expect(shared?.hasPrefix("pushfleet's processes saturated this machine: the fleet used 0.7 and its push service 1.2 of 2 cores") == true)
        #expect(ResultBuilder.sharedMachineLimit(fleetCores: 0.3, machineCores: 2, pushService: beside) == nil)
        beside.processOnFleetMachine = false
        #expect(ResultBuilder.sharedMachineLimit(fleetCores: 0.7, machineCores: 2, pushService: beside) == nil, "on another machine")
        // Wanting a core 95% of the traffic and running 40%: starved by other processes or a quota.
        var starved = calm
        starved.busiestLoopDemand = 0.95
        #expect(limits(starved).isEmpty, "in the fleet's process the fleet's own checks judge the wait")
        starved.processCoreShare = 0.03
        starved.processCores = 2
        #expect(limits(starved) == [
            "push service starved: its busiest event loop wanted a core 95.0% of the traffic and ran 40.0%; other processes on its cores, or a CPU quota, held it back; pushes waited for pushfleet's push service, and the backend hop includes that wait"
        ])
        // Wanting a core less than 90% of the traffic, it is starved when it waited a quarter of
        // the traffic or more and ran less than an eighth of the time it wanted one: 0.50 against
        // 0.016 (a quota of 2% on a machine whose fleet fell behind too, so fewer pushes came).
        starved.busiestLoopDemand = 0.85
        #expect(limits(starved).isEmpty, "ran half the time it wanted a core")
        starved.busiestLoopDemand = 0.5
        starved.busiestLoopShare = 0.016
        #expect(limits(starved).count == 1 && limits(starved)[0].hasPrefix("push service starved: its busiest event loop wanted a core 50.0% of the traffic and ran 1.6%"))
        // A loaded machine's: wanted 35.9%, ran 8.6% (a quarter of it), no timer check late.
        starved.busiestLoopDemand = 0.359
        starved.busiestLoopShare = 0.086
        #expect(limits(starved).isEmpty)
        // Ran a tenth of what it wanted, but waited less than a quarter of the traffic.
        starved.busiestLoopDemand = 0.2
        starved.busiestLoopShare = 0.02
        #expect(limits(starved).isEmpty)
        starved.busiestLoopDemand = 0.97
        starved.busiestLoopShare = 0.92
        #expect(limits(starved).count == 1 && limits(starved)[0].hasPrefix("push service saturated"), "named once, as saturated")
        var few = calm
        few.checks = 20
        few.lateChecks = 4
        #expect(limits(few).isEmpty, "fewer than five late checks are noise")
    }

    @Test("a run whose push service's loops are held busy through the traffic is inconclusive, named as pushfleet's push service")
    func heldLoops() async throws {
        let spinner = Mutex<Task<Void, Never>?>(nil)
        let yaml = GeneratorHonestyTests.yaml.replacingOccurrences(of: "[\"value < 0.25\"]", with: "[]")
        let (scenario, options) = try GeneratorHonestyTests.prepare(yaml) {
            $0.beforeTraffic = {
                // Every loop runs 300 ms stretches, one after another, for longer than the
                // traffic: the loops' timers, due every 100 ms, wake 200 ms late or more.
                let task = Task {
                    let end = ContinuousClock.now + .seconds(3)
                    await withDiscardingTaskGroup { group in
                        for loop in MultiThreadedEventLoopGroup.singleton.makeIterator() {
                            group.addTask {
                                while ContinuousClock.now < end {
                                    try? await loop.submit {
                                        let stretch = NIODeadline.now() + .milliseconds(300)
                                        while NIODeadline.now() < stretch {}
                                    }.get()
                                    try? await Task.sleep(for: .milliseconds(5))
                                }
                            }
                        }
                    }
                }
                spinner.withLock { $0 = task }
            }
        }
        // The gate is held until the loops are free again: the singleton's loops serve every
        // other test's servers, and the next gated run must not start on held loops.
        let result = try await RunGate.exclusive {
            let result = try await FleetRunner(scenario: scenario, options: options).run()
            await spinner.withLock { $0 }?.value
            return result
        }
        let generator = try #require(result.generator)
        let load = try #require(generator.pushService)
        #expect(load.lateChecks >= 5 && load.meanLateMs >= 150, "\(load)")
        #expect(generator.limits.contains { $0.hasPrefix("push service behind") }, "\(generator.limits)")
        #expect(result.inconclusive)
        #expect(ReportFiles.verdict(result) == "inconclusive")
        #expect(result.delivery.misdelivered == 0)
    }

    @Test("a push service that never answers its stats is silent after every try; one that answers without loops says nothing; the silence is a limit of pushfleet's")
    func silentService() async throws {
        try await FleetHTTPClientRawTests.withServer(["/admin/stats": []]) { port, script in
            let system = SystemUnderTest(backend: "http://127.0.0.1:1", pushService: "http://127.0.0.1:\(port)")
            // Each try lasts its whole timeout: two took at least two. (A starved machine may not
            // even send a request before its timeout, so the server's count proves nothing.)
            let started = ContinuousClock.now
            #expect(await PushServiceLoadReading.read(system, clock: .system, timeout: .seconds(1), attempts: 2) == .silent)
            #expect(ContinuousClock.now - started >= .seconds(2), "asked again after the first timeout")
            #expect(script.seen.withLock { $0.requests }.allSatisfy { $0 == "/admin/stats" })
        }
        try await FleetHTTPClientRawTests.withServer(["/admin/stats": ["HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"]]) { port, script in
            let system = SystemUnderTest(backend: "http://127.0.0.1:1", pushService: "http://127.0.0.1:\(port)")
            #expect(await PushServiceLoadReading.read(system, clock: .system, timeout: .seconds(60), attempts: 3) == .unsaid)
            #expect(script.seen.withLock { $0.requests } == ["/admin/stats"], "an answer ends the asking")
        }
        let limit = ResultBuilder.pushServiceSilence(seconds: 15)
        #expect(limit.hasPrefix("push service unresponsive") && limit.contains("no answer in 15.0 s") && limit.contains("the backend hop includes that wait"))
    }

    @Test("a run at ease reads the push service's loops and names no limit of theirs")
    func easyRun() async throws {
        let result = try await GeneratorHonestyTests.run(GeneratorHonestyTests.yaml)
        let load = try #require(result.generator?.pushService)
        #expect(load.loops == MultiThreadedEventLoopGroup.singleton.makeIterator().reduce(0) { count, _ in count + 1 })
        #expect(load.checks >= load.loops * 10, "\(load)")
        #expect(!(result.generator?.limits ?? []).contains { $0.hasPrefix("push service") })
        // In the fleet's own process the push service's CPU is the fleet's, and not given twice.
        #expect(load.processCoreShare == nil)
        let html = String(decoding: try ReportFiles.render(result).first { $0.name == "report.html" }!.data, as: UTF8.self)
        #expect(html.contains("push service loops") && html.contains("of \(load.checks) checks 100 ms or more late"))
    }
}
