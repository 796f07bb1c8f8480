import Foundation
import PushFleetCore
import PushFleetScenario
import Testing

/// The plan of a run's network faults, without a kernel: who is touched, the addresses, when
/// rules change and what they say.
@Suite("Network fault plan")
struct NetworkFaultPlanTests {
    typealias Fault = Scenario.NetworkFault

    static func plan(_ faults: [Fault], devices: Int = 1000, seed: UInt64 = 7, runID: String = "run1") -> NetworkFaultPlan {
        NetworkFaultPlan(faults: faults, devices: devices, seed: seed, runID: runID, pid: 99, instance: 3)
    }

    @Test("a share picks about that many devices, the same ones for the same seed, others for another seed; every address names its device")
    func membersAndAddresses() {
        let fault = Fault(link: .phone, kind: .partition(.both), at: .seconds(1), duration: .seconds(2), share: 0.2)
        let plan = Self.plan([fault], devices: 5000)
        let count = plan.members[0].count
        #expect((850...1150).contains(count), "\(count) of 5000 for 20%")
        #expect(plan.members[0] == Self.plan([fault], devices: 5000, runID: "another").members[0], "membership is the seed's, not the run id's")
        #expect(plan.members[0] != Self.plan([fault], devices: 5000, seed: 8).members[0])
        #expect(plan.members[0] == plan.members[0].sorted())
        let all = Self.plan([Fault(link: .phone, kind: .loss(0.05), at: .zero, duration: .seconds(1))], devices: 300)
        #expect(all.members[0] == Array(0..<300))
        var seen = Set<String>()
        for device in [0, 1, 254, 255, 256, 4999, NetworkFaultPlan.maxDevices - 1] {
            let address = plan.address(of: device)
            #expect(address.hasPrefix("127.\(plan.base)."))
            #expect(!address.hasSuffix(".0") || device == 255, "\(address)")
            #expect(plan.device(at: address) == device, "\(address)")
            seen.insert(address)
        }
        #expect(seen.count == 7)
        #expect(plan.device(at: "127.0.0.1") == nil)
        #expect(plan.device(at: "127.\(plan.base).0.0") == nil)
        #expect((100...227).contains(plan.base))
        #expect(plan.table == "pushfleet_99_3")
        #expect(NetworkFaultPlan.pid(ofTable: plan.table) == 99)
        #expect(NetworkFaultPlan.pid(ofTable: "filter") == nil)
    }

    @Test("shares nest: a smaller share's devices are within a larger one's, and equal shares touch the same devices")
    func nestedShares() {
        let faults = [0.2, 0.5, 0.2].map { Fault(link: .phone, kind: .loss(0.05), at: .zero, duration: .seconds(1), share: $0) }
        let plan = Self.plan(faults, devices: 2000)
        #expect(Set(plan.members[0]).isSubset(of: Set(plan.members[1])))
        #expect(plan.members[0] == plan.members[2])
        #expect(plan.members[1].count > plan.members[0].count)
    }

    @Test("a latency fault holds a device's chunks back by its delay within the jitter, only while in force and only for its devices")
    func delays() {
        let slow = Fault(link: .phone, kind: .latency(.milliseconds(200), jitter: .milliseconds(100)), at: .zero, duration: .seconds(10), share: 0.5)
        let steady = Fault(link: .phone, kind: .latency(.milliseconds(50), jitter: .zero), at: .zero, duration: .seconds(10), share: 0.5)
        let loss = Fault(link: .phone, kind: .loss(0.5), at: .zero, duration: .seconds(10))
        let plan = Self.plan([slow, steady, loss], devices: 400)
        let member = plan.members[0][0]
        let outsider = (0..<400).first { !plan.members[0].contains($0) }!
        var draw = SplitMix64(seed: 3)
        let samples = (0..<2000).map { _ in plan.delay(device: member, active: [0], draw: &draw) }
        #expect(samples.allSatisfy { (100_000_000...300_000_000).contains($0) })
        #expect(samples.min()! < 110_000_000 && samples.max()! > 290_000_000, "the jitter's spread is used")
        #expect(plan.delay(device: member, active: [1], draw: &draw) == 50_000_000)
        #expect(plan.delay(device: member, active: [0, 1], draw: &draw) >= 150_000_000, "two in force add up")
        #expect(plan.delay(device: outsider, active: [0, 1, 2], draw: &draw) == 0)
        #expect(plan.delay(device: member, active: [], draw: &draw) == 0)
        #expect(plan.rules(0).isEmpty && plan.rules(1).isEmpty, "delays are the proxy's, not the kernel's")
        #expect(Scenario.Network(faults: [slow]).needsProxy && !Scenario.Network(faults: [slow]).needsKernel)
        #expect(Scenario.Network(faults: [slow, loss]).needsKernel)
        #expect(slow.label == "phone latency 200ms ± 100ms, 50% of devices")
    }

    @Test("changes follow windows and flaps; overlapping faults are in force together; the last change clears everything")
    func changes() {
        let partition = Fault(link: .phone, kind: .partition(.both), at: .seconds(10), duration: .seconds(30), share: 0.2)
        let flapping = Fault(
            link: .phone, kind: .loss(0.05), at: .seconds(20), duration: .seconds(25), share: 0.5, flap: .init(down: .seconds(5), up: .seconds(5))
        )
        let plan = Self.plan([partition, flapping])
        let changes = plan.changes.map { ($0.at / .seconds(1), $0.active) }
        let expected: [(Double, [Int])] = [(10, [0]), (20, [0, 1]), (25, [0]), (30, [0, 1]), (35, [0]), (40, [1]), (45, [])]
        #expect(changes.count == expected.count, "\(changes)")
        for (got, want) in zip(changes, expected) {
            #expect(got.0 == want.0 && got.1 == want.1, "\(changes)")
        }
        #expect(plan.changes[1].began == [1] && plan.changes[1].ended.isEmpty)
        #expect(plan.changes[5].began == [1] && plan.changes[5].ended == [0])
        #expect(plan.changes.last?.ended == [1])
    }

    @Test("the time a partition began is found for its own devices only, within its window and the slack after it")
    func partitionStart() throws {
        let partition = Fault(link: .phone, kind: .partition(.toDevice), at: .seconds(10), duration: .seconds(5), share: 0.3)
        let loss = Fault(link: .phone, kind: .loss(0.5), at: .zero, duration: .seconds(60))
        let plan = Self.plan([partition, loss])
        let member = try #require(plan.members[0].first)
        let outsider = try #require((0..<1000).first { !plan.members[0].contains($0) })
        #expect(plan.partitionStart(device: member, at: .seconds(12), slack: .seconds(3)) == .seconds(10))
        #expect(plan.partitionStart(device: member, at: .seconds(17), slack: .seconds(3)) == .seconds(10))
        #expect(plan.partitionStart(device: member, at: .seconds(19), slack: .seconds(3)) == nil, "past the window and its slack")
        #expect(plan.partitionStart(device: member, at: .seconds(9), slack: .seconds(3)) == nil, "before it began")
        #expect(plan.partitionStart(device: outsider, at: .seconds(12), slack: .seconds(3)) == nil, "loss is no partition")
    }

    @Test("the scripts: one table with a set per fault; the rules drop what each kind and direction says, on the gateway's port")
    func scripts() {
        let faults = [
            Fault(link: .phone, kind: .partition(.both), at: .zero, duration: .seconds(1), share: 0.01),
            Fault(link: .phone, kind: .partition(.toDevice), at: .zero, duration: .seconds(1)),
            Fault(link: .phone, kind: .partition(.fromDevice), at: .zero, duration: .seconds(1)),
            Fault(link: .phone, kind: .loss(0.055), at: .zero, duration: .seconds(1)),
        ]
        let plan = Self.plan(faults, devices: 3)
        #expect(plan.members[0].isEmpty, "1% of 3 devices with this seed")
        let install = plan.installScript
        #expect(install.hasPrefix("table inet pushfleet_99_3 {}\ndelete table inet pushfleet_99_3\n"))
        #expect(install.contains("set f0 {\n    type ipv4_addr\n  }"), "an empty set has no elements line")
        #expect(install.contains("elements = { 127.\(plan.base).0.1, 127.\(plan.base).0.2, 127.\(plan.base).0.3 }"))
        #expect(install.contains("type filter hook output priority filter; policy accept;"))
        let rules = plan.applyScript(active: [0, 1, 2, 3]).split(separator: "\n").map(String.init)
        #expect(rules == [
            "flush chain inet pushfleet_99_3 links",
            "flush chain inet pushfleet_99_3 inbound",
            "add rule inet pushfleet_99_3 links ip saddr @f0 meta l4proto tcp counter drop",
            "add rule inet pushfleet_99_3 links ip daddr @f0 meta l4proto tcp counter drop",
            "add rule inet pushfleet_99_3 links ip daddr @f1 meta l4proto tcp counter drop",
            "add rule inet pushfleet_99_3 links ip saddr @f2 meta l4proto tcp counter drop",
            "add rule inet pushfleet_99_3 links ip saddr @f3 meta l4proto tcp numgen random mod 10000 < 550 counter drop",
            "add rule inet pushfleet_99_3 links ip daddr @f3 meta l4proto tcp numgen random mod 10000 < 550 counter drop",
        ])
        #expect(plan.applyScript(active: []) == "flush chain inet pushfleet_99_3 links\nflush chain inet pushfleet_99_3 inbound\n")
        #expect(plan.removeScript == "delete table inet pushfleet_99_3\n")
    }

    static let base = """
        name: n
        fleet: { users: 10 }
        lifecycle: [login, register, connect, receive]
        traffic: [{ kind: plain, rate: 1/s, duration: 1s }]

        """

    func issues(_ network: String, fleet: String? = nil) -> [String] {
        var yaml = Self.base + network
        if let fleet { yaml = yaml.replacingOccurrences(of: "fleet: { users: 10 }", with: fleet) }
        do {
            _ = try ScenarioLoader.parse(yaml, file: "n.yaml")
            return []
        } catch {
            return error.issues.map(\.description)
        }
    }

    @Test("a network section is read whole: keepalive, the gateway's ping, faults of each kind with shares and flaps")
    func reads() throws {
        let yaml = Self.base + """
            network:
              keepalive: { ping: 1s, dead_after: 3s, acks: false }
              gateway_ping: 2s
              faults:
                - { link: phone, at: 5s, for: 30s, share: 20%, partition: both }
                - { link: phone, at: 0s, for: 1m, loss: 5%, flap: { down: 5s, up: 10s } }
                - { link: phone, at: 1s, for: 2s, partition: to_device }
                - { link: phone, at: 1s, for: 2s, latency: 200ms, jitter: 100ms }
            """
        let network = try ScenarioLoader.parse(yaml, file: "n.yaml").network
        #expect(network.keepalive == Scenario.Keepalive(ping: .seconds(1), deadAfter: .seconds(3), acks: false))
        #expect(network.gatewayPing == .seconds(2))
        #expect(network.faults == [
            Fault(link: .phone, kind: .partition(.both), at: .seconds(5), duration: .seconds(30), share: 0.2),
            Fault(link: .phone, kind: .loss(0.05), at: .zero, duration: .seconds(60), flap: .init(down: .seconds(5), up: .seconds(10))),
            Fault(link: .phone, kind: .partition(.toDevice), at: .seconds(1), duration: .seconds(2)),
            Fault(link: .phone, kind: .latency(.milliseconds(200), jitter: .milliseconds(100)), at: .seconds(1), duration: .seconds(2)),
        ])
        #expect(network.faults[0].label == "phone partition both, 20% of devices")
        #expect(network.faults[2].label == "phone partition to device, 100% of devices")
    }

    @Test("--only-fault keeps the one fault it names; a place past the list, or a scenario without faults, is refused")
    func onlyFault() throws {
        let yaml = Self.base + """
            network:
              faults:
                - { link: phone, at: 5s, for: 30s, share: 20%, partition: both }
                - { link: phone, at: 0s, for: 1m, loss: 5% }
            """
        let second = try ScenarioLoader.parse(yaml, file: "n.yaml", overrides: ScenarioOverrides(onlyFault: 2))
        #expect(second.network.faults == [Fault(link: .phone, kind: .loss(0.05), at: .zero, duration: .seconds(60))])
        for (text, place, message) in [(yaml, 3, "give 1 to 2"), (yaml, 0, "give 1 to 2"), (Self.base, 1, "this scenario has no network faults")] {
            do {
                _ = try ScenarioLoader.parse(text, file: "n.yaml", overrides: ScenarioOverrides(onlyFault: place))
                Issue.record("--only-fault \(place) was taken")
            } catch {
                #expect(error.issues.map(\.description).joined().contains(message), "\(error.issues)")
            }
        }
    }

    @Test("bad network sections are refused where they are wrong, with what to write instead")
    func refuses() {
        func only(_ network: String, fleet: String? = nil) -> String {
            let found = issues(network, fleet: fleet)
            return found.count == 1 ? found[0] : "\(found.count) issues: \(found)"
        }
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s }] }").contains("give what the link does: loss: N%"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s, loss: 5%, partition: both }] }").contains("give one of loss, partition: one fault, one kind"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s, latency: 100ms, jitter: 200ms }] }").contains("jitter may be at most the latency"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s, latency: 0ms }] }").contains("a latency of 0 does nothing"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s, latency: 50s, jitter: 20s }] }").contains("at most 60s"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s, loss: 5%, jitter: 20ms }] }").contains("jitter goes with latency"))
        #expect(only("network: { faults: [{ link: wifi, at: 1s, for: 2s, loss: 5% }] }").contains("'wifi' is not one of phone"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s, partition: sideways }] }").contains("'sideways' is not one of both, to_device, from_device"))
        #expect(only("network: { faults: [{ at: 1s, for: 2s, loss: 5% }] }").contains("network.faults[0].link: required"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, loss: 5% }] }").contains("network.faults[0].for: required"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s, loss: 0 }] }").contains("a loss of 0 does nothing"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s, loss: 5%, share: 0 }] }").contains("a fault on no device does nothing"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s, loss: 150% }] }").contains("network.faults[0].loss"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 25h, loss: 5% }] }").contains("may be at most 24h"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 2s, loss: 5%, flap: { down: 2s, up: 1s } }] }").contains("longer than the fault's window"))
        #expect(only("network: { faults: [{ link: phone, at: 1s, for: 9s, loss: 5%, flap: { down: 2s } }] }").contains("give down"))
        #expect(only("network: { keepalive: { ping: 3s, dead_after: 3s } }").contains("must be longer than ping"))
        #expect(only("network: { keepalive: { ping: 1s } }").contains("give both ping"))
        #expect(only("network: { keepalive: { ping: 10ms, dead_after: 3s } }").contains("must be between 100ms and 1h"))
        #expect(only("network: { gateway_ping: 2h }").contains("must be between 100ms and 1h"))
        #expect(only("network: { faults: [], jitter: 1s }").contains("jitter"))
        let phone = "network: { faults: [{ link: phone, at: 1s, for: 2s, partition: both }] }"
        #expect(only(phone, fleet: "fleet: { users: 10, push_channel: multiplexed }").contains("they need push_channel: per_device"))
        #expect(only(phone, fleet: "fleet: { users: 10, source_addresses: [127.0.0.2] }").contains("leave fleet.source_addresses out"))
        #expect(only(phone, fleet: "fleet: { users: 70000 }").contains("at most 65534 devices"))
        #expect(issues(phone).isEmpty)
    }
}
