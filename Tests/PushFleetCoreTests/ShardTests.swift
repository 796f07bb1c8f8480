import PushFleetCore
import PushFleetScenario
import Testing

/// A run cut into K shards: each device and each send of the single-process plan is played by
/// exactly one shard, and the shards meet at their barriers.
@Suite("Shards")
struct ShardTests {
    @Test("INDEX/COUNT is read, and anything else is refused with the reason")
    func parsing() throws {
        let shard = try Shard(parsing: "2/4")
        #expect(shard.index == 2 && shard.count == 4 && shard.description == "2/4" && shard.folderName == "shard-2-of-4")
        #expect(Shard(folderName: "shard-2-of-4") == shard)
        for bad in ["", "4/4", "-1/4", "0/0", "1", "1/", "/4", "a/b", "0/1025", "1/2/3", " 0/2"] {
            #expect(throws: Shard.InvalidShard.self, "\(bad)") { try Shard(parsing: bad) }
        }
        for bad in ["shard-4-of-4", "shard-0-of-0", "shard-1-4", "shards-0-of-2", "shard-x-of-2"] {
            #expect(Shard(folderName: Substring(bad)) == nil, "\(bad)")
        }
        #expect(Shard.whole.isWhole && Shard.whole.owns(device: 12_345) && Shard.whole.owns(send: 7))
    }

    @Test("the K slices of devices and sends are disjoint and together the whole; send ids are unique; limits are shared out")
    func slicesPartitionThePlan() throws {
        for count in 1...7 {
            let shards = try (0..<count).map { try Shard(index: $0, count: count) }
            for item in 0..<200 {
                #expect(shards.filter { $0.owns(device: item) }.count == 1)
                #expect(shards.filter { $0.owns(send: item) }.count == 1)
            }
            var ids = Set<Int>()
            for shard in shards {
                for local in 1...50 {
                    #expect(ids.insert(shard.sendID(local)).inserted, "\(shard) \(local)")
                    #expect(Shard.index(ofSend: shard.sendID(local), count: count) == shard.index)
                }
            }
            // The ids of the first n sends of each shard are exactly 1…n×K: no gaps, no clashes.
            #expect(ids == Set(1...(50 * count)))
            for limit in [1, 2, 5, 64, 1000] {
                let parts = shards.map { $0.share(of: limit) }
                #expect(parts.allSatisfy { $0 >= 1 })
                #expect(parts.reduce(0, +) == max(limit, count), "\(limit) over \(count): \(parts)")
            }
        }
    }

    @Test("the shards' device slices of a real plan are its devices, each once")
    func planSlices() throws {
        let scenario = try ScenarioLoader.parse(
            """
            name: slices
            seed: 9
            target: embedded
            fleet: { users: 50, devices_per_user: { min: 1, max: 4 }, platforms: { apns: 2, fcm: 1, wns: 1 } }
            traffic:
              - { name: plain, kind: plain, rate: 10/s, duration: 2s }
            """,
            file: "slices.yaml"
        )
        let plan = FleetPlan(scenario: scenario, runID: "abc123")
        let shards = try (0..<3).map { try Shard(index: $0, count: 3) }
        let slices = shards.map { shard in plan.devices.filter { shard.owns(device: $0.index) } }
        #expect(slices.map(\.count).reduce(0, +) == plan.devices.count)
        #expect(Set(slices.flatMap { $0.map(\.token) }) == Set(plan.devices.map(\.token)))
        // Users have devices in several shards: what makes a cross-shard pair.
        let split = (0..<plan.users).filter { user in Set(plan.devicesOfUser[user].map { $0 % 3 }).count > 1 }
        #expect(!split.isEmpty)
    }

    @Test("the barrier opens at the latest mark plus the lead, waits for the missing, stops at a failed shard, and times out naming who never came")
    func barrier() {
        let lead = ShardBarrier.lead
        #expect(ShardBarrier.decide(marks: [0: .ready(at: 100), 1: .ready(at: 300)], count: 2, now: 400, deadline: 1_000) == .start(atWall: 300 + lead))
        #expect(ShardBarrier.decide(marks: [0: .ready(at: 100)], count: 3, now: 400, deadline: 1_000) == .wait)
        #expect(ShardBarrier.decide(marks: [0: .ready(at: 100)], count: 3, now: 1_000, deadline: 1_000) == .timedOut(missing: [1, 2]))
        #expect(ShardBarrier.decide(marks: [0: .ready(at: 100), 2: .failed("no target")], count: 3, now: 0, deadline: 1_000) == .failed(shard: 2, reason: "no target"))
        // Marks of shards that are not in the run are not counted.
        #expect(ShardBarrier.decide(marks: [0: .ready(at: 1), 7: .ready(at: 9)], count: 2, now: 0, deadline: 5) == .wait)
        for mark in [ShardBarrier.Mark.ready(at: 1_764_000_000_000_000_000), .failed("the target\nwas down")] {
            let parsed = ShardBarrier.mark(parsing: ShardBarrier.text(of: mark))
            if case .failed = mark { #expect(parsed == .failed("the target was down")) } else { #expect(parsed == mark) }
        }
        for garbage in ["", "ready", "ready x", "ready -5", "go 5", "\u{0}"] {
            #expect(ShardBarrier.mark(parsing: garbage) == nil, "\(garbage)")
        }
    }
}
