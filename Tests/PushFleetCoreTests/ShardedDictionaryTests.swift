import PushFleetCore
import Testing

/// The sharded tables against Swift's own, operation by operation.
@Suite("Sharded dictionary and set")
struct ShardedDictionaryTests {
    @Test("20,000 random inserts, updates in place, defaults and removals: the same contents as a Dictionary's at every step's end")
    func dictionaryAgrees() {
        var generator = SplitMix64(seed: 38)
        var sharded = ShardedDictionary<String, [Int]>()
        var reference: [String: [Int]] = [:]
        for step in 0..<20_000 {
            let key = "k\(generator.next() % 3_000)"
            switch generator.next() % 5 {
            case 0:
                sharded[key] = [step]
                reference[key] = [step]
            case 1:
                sharded[key]?.append(step)
                reference[key]?.append(step)
            case 2:
                sharded[key, default: []].append(step)
                reference[key, default: []].append(step)
            case 3:
                #expect(sharded.removeValue(forKey: key) == reference.removeValue(forKey: key))
            default:
                #expect(sharded[key] == reference[key])
            }
        }
        #expect(sharded.count == reference.count && sharded.count > 1_000)
        #expect(!sharded.isEmpty)
        var seen: [String: [Int]] = [:]
        for (key, value) in sharded {
            #expect(seen.updateValue(value, forKey: key) == nil, "\(key) iterated twice")
        }
        #expect(seen == reference)
        // The keys spread over every shard, none holding more than twice its share: the point
        // is that no one table holds them all.
        let sizes = sharded.shardSizes
        let share = Double(sharded.count) / Double(sizes.count)
        #expect(sizes.count == 64 && sizes.allSatisfy { $0 > 0 && Double($0) < 2 * share }, "\(sizes)")
        sharded.removeAll()
        #expect(sharded.isEmpty && sharded.count == 0 && Array(sharded).isEmpty)
    }

    @Test("a set: inserts, removals and membership as a Set's; equality by contents whatever the order of insertion")
    func setAgrees() {
        var generator = SplitMix64(seed: 6)
        var sharded = ShardedSet<Int>()
        var reference = Set<Int>()
        for _ in 0..<20_000 {
            let element = Int(generator.next() % 5_000)
            switch generator.next() % 3 {
            case 0: #expect(sharded.insert(element) == reference.insert(element).inserted)
            case 1: #expect(sharded.remove(element) == reference.remove(element))
            default: #expect(sharded.contains(element) == reference.contains(element))
            }
        }
        #expect(sharded.count == reference.count && Set(sharded) == reference && Array(sharded).count == reference.count)
        let reversed = ShardedSet(reference.sorted().reversed())
        #expect(reversed == sharded)
        #expect(ShardedSet([1, 2, 3]) == [3, 2, 1] && ShardedSet([1, 2]) != [1, 2, 3])
    }
}
