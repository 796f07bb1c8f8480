import PushFleetCore
import PushFleetScenario
import Testing

/// The links other than the phone's: the backend's to the push service and the fleet's to the
/// backend, as the plan's rules and the scenario's checks see them.
@Suite("Network links")
struct NetworkLinkTests {
    typealias Fault = Scenario.NetworkFault

    static let endpoints = NetworkFaultPlan.Endpoints(pushServiceHost: "127.0.0.1", pushServicePorts: [4100, 4443], backendHost: "127.0.0.9", backendPort: 8081)

    static func plan(_ faults: [Fault]) -> NetworkFaultPlan {
        NetworkFaultPlan(faults: faults, devices: 50, seed: 7, runID: "run1", pid: 99, instance: 3, endpoints: endpoints)
    }

    @Test("backend_push drops the push service's traffic with anything but the run's own addresses, requests at input and answers at output")
    func backendPushRules() {
        let plan = Self.plan([
            Fault(link: .backendPush, kind: .partition(.both), at: .zero, duration: .seconds(1)),
            Fault(link: .backendPush, kind: .partition(.toPushService), at: .zero, duration: .seconds(1)),
            Fault(link: .backendPush, kind: .partition(.fromPushService), at: .zero, duration: .seconds(1)),
            Fault(link: .backendPush, kind: .loss(0.1), at: .zero, duration: .seconds(1)),
        ])
        let own = "127.\(plan.base).0.0/16"
        let request = "ip daddr 127.0.0.1 tcp dport { 4100, 4443 } ip saddr != \(own)"
        let answer = "ip saddr 127.0.0.1 tcp sport { 4100, 4443 } ip daddr != \(own)"
        #expect(plan.rules(0).map(\.chain) == [.inbound, .links])
        #expect(plan.rules(0).map(\.match) == [request + " counter drop", answer + " counter drop"])
        #expect(plan.rules(1).map(\.match) == [request + " counter drop"])
        #expect(plan.rules(2).map(\.match) == [answer + " counter drop"])
        #expect(plan.rules(3).map(\.match) == [request, answer].map { $0 + " numgen random mod 10000 < 1000 counter drop" })
        let script = plan.applyScript(active: [1]).split(separator: "\n")
        #expect(script.last == "add rule inet pushfleet_99_3 inbound \(request) counter drop")
        #expect(plan.installScript.contains("type filter hook input priority filter; policy accept;"))
        #expect(!plan.installScript.contains("set f0"), "no set: the link is every device's")
        #expect(plan.members.allSatisfy { $0 == Array(0..<50) }, "every device's sends cross the link")
        #expect(plan.device(at: plan.fleetAddress) == nil, "the proxy's address is no device's")
        #expect(plan.fleetAddress.hasPrefix("127.\(plan.base)."))
        #expect(plan.faults[0].label == "backend_push partition both")
    }

    @Test("fleet_backend drops the fleet's packets to the backend's port at output and the backend's answers at input")
    func fleetBackendRules() {
        let plan = Self.plan([
            Fault(link: .fleetBackend, kind: .partition(.toBackend), at: .zero, duration: .seconds(1)),
            Fault(link: .fleetBackend, kind: .partition(.fromBackend), at: .zero, duration: .seconds(1)),
        ])
        #expect(plan.rules(0).map(\.chain) == [.links])
        #expect(plan.rules(0).map(\.match) == ["ip daddr 127.0.0.9 tcp dport 8081 counter drop"])
        #expect(plan.rules(1).map(\.chain) == [.inbound])
        #expect(plan.rules(1).map(\.match) == ["ip saddr 127.0.0.9 tcp sport 8081 counter drop"])
    }

    @Test("a partition of another link is not a phone's: devices' and the gateway's notice times look for the phone's only")
    func partitionPhaseIsThePhones() throws {
        let plan = Self.plan([
            Fault(link: .backendPush, kind: .partition(.both), at: .seconds(1), duration: .seconds(10)),
            Fault(link: .phone, kind: .partition(.both), at: .seconds(5), duration: .seconds(2)),
        ])
        #expect(plan.partitionPhase(device: 3, at: .seconds(3), slack: .zero) == nil)
        let phase = try #require(plan.partitionPhase(device: 3, at: .seconds(6), slack: .zero))
        #expect(phase.fault == 1 && phase.start == .seconds(5) && phase.end == .seconds(7))
        #expect(plan.partitionPhase(device: 3, at: .seconds(8), slack: .seconds(2))?.fault == 1)
    }

    static let base = """
        name: n
        fleet: { users: 10 }
        lifecycle: [login, register, connect, receive]
        traffic: [{ kind: plain, rate: 1/s, duration: 1s }]

        """

    func issues(_ text: String) -> [String] {
        do {
            _ = try ScenarioLoader.parse(Self.base + text, file: "n.yaml")
            return []
        } catch {
            return error.issues.map(\.description)
        }
    }

    @Test("faults on the backend's links are read; a share, a latency or another link's direction is refused with what to give")
    func loads() throws {
        let yaml = Self.base + """
            network:
              faults:
                - { link: backend_push, at: 2s, for: 5s, partition: to_push_service }
                - { link: fleet_backend, at: 2s, for: 5s, loss: 3% }
            """
        let faults = try ScenarioLoader.parse(yaml, file: "n.yaml").network.faults
        #expect(faults == [
            Fault(link: .backendPush, kind: .partition(.toPushService), at: .seconds(2), duration: .seconds(5)),
            Fault(link: .fleetBackend, kind: .loss(0.03), at: .seconds(2), duration: .seconds(5)),
        ])
        func only(_ fault: String) -> String {
            let found = issues("network: { faults: [\(fault)] }")
            return found.count == 1 ? found[0] : "\(found.count) issues: \(found)"
        }
        #expect(only("{ link: backend_push, at: 1s, for: 2s, partition: both, share: 20% }").contains("a fault takes all of it (leave share out)"))
        #expect(only("{ link: fleet_backend, at: 1s, for: 2s, latency: 100ms }").contains("on the phone link only"))
        #expect(only("{ link: backend_push, at: 1s, for: 2s, partition: to_device }").contains("give both, to_push_service, from_push_service"))
        #expect(only("{ link: phone, at: 1s, for: 2s, partition: to_backend }").contains("give both, to_device, from_device"))
        #expect(only("{ link: fleet_backend, at: 1s, for: 2s, partition: from_push_service }").contains("give both, to_backend, from_backend"))
        let external = "target: { backend: \"http://127.0.0.1:8081\", pns: \"http://127.0.0.1:8090\" }\n"
        let refused = issues(external + "network: { faults: [{ link: backend_push, at: 1s, for: 2s, partition: both }] }")
        #expect(refused.count == 1 && refused[0].contains("need the push service to be the run's own"), "\(refused)")
        #expect(issues(external + "network: { faults: [{ link: fleet_backend, at: 1s, for: 2s, partition: both }] }").isEmpty)
    }

    @Test("the proxy's toxics for a device: delays add, the slowest bandwidth and the finest slicer win, a timeout swallows; only its devices, only in force")
    func toxics() throws {
        let faults = [
            Fault(link: .phone, kind: .bandwidth(bytesPerSecond: 64_000), at: .zero, duration: .seconds(9)),
            Fault(link: .phone, kind: .bandwidth(bytesPerSecond: 8000), at: .zero, duration: .seconds(9), share: 0.5),
            Fault(link: .phone, kind: .slicer(size: 16, delay: .milliseconds(2)), at: .zero, duration: .seconds(9)),
            Fault(link: .phone, kind: .slicer(size: 64, delay: .milliseconds(1)), at: .zero, duration: .seconds(9)),
            Fault(link: .phone, kind: .slowClose(.seconds(2)), at: .zero, duration: .seconds(9)),
            Fault(link: .phone, kind: .timeout(.seconds(3)), at: .zero, duration: .seconds(9), share: 0.5),
            Fault(link: .phone, kind: .resetPeer(.milliseconds(500)), at: .zero, duration: .seconds(9)),
            Fault(link: .phone, kind: .timeout(.zero), at: .zero, duration: .seconds(9)),
        ]
        let plan = Self.plan(faults)
        let half = try #require(plan.members[1].first)
        let other = try #require((0..<50).first { !plan.touches(1, device: $0) })
        #expect(plan.members[5] == plan.members[1], "equal shares touch the same devices")
        var draw = SplitMix64(seed: 1)
        let all = plan.toxics(device: half, active: Array(0..<7), draw: &draw)
        #expect(all.bytesPerSecond == 8000 && all.slice?.size == 16 && all.slice?.gap == 2_000_000 && all.slowClose == 2_000_000_000 && all.blackhole)
        let outside = plan.toxics(device: other, active: Array(0..<7), draw: &draw)
        #expect(outside.bytesPerSecond == 64_000 && !outside.blackhole, "faults of half the devices leave the others")
        #expect(plan.toxics(device: half, active: [], draw: &draw) == NetworkFaultPlan.LinkToxics(), "nothing out of force")
        #expect(plan.cut(5).map { $0.after == .seconds(3) && !$0.reset } == true)
        #expect(plan.cut(6).map { $0.after == .milliseconds(500) && $0.reset } == true)
        #expect(plan.cut(7) == nil && plan.cut(0) == nil, "a timeout of 0 never closes; a bandwidth cuts nothing")
        #expect(faults.allSatisfy { $0.kind.isToxic && !$0.dropsPackets } && (0..<8).allSatisfy { plan.rules($0).isEmpty })
        #expect(faults[0].label == "phone bandwidth 64KB/s, 100% of devices")
        #expect(faults[2].label == "phone slicer 16 B every 2ms, 100% of devices")
        #expect(faults[7].label == "phone timeout (never closed), 100% of devices")
    }

    @Test("toxics are read from the scenario with their units; bad ones are refused with what to give")
    func loadsToxics() throws {
        let yaml = Self.base + """
            network:
              faults:
                - { link: phone, at: 1s, for: 2s, bandwidth: 1.5MB/s }
                - { link: phone, at: 1s, for: 2s, bandwidth: 800 B/s }
                - { link: phone, at: 1s, for: 2s, slicer: { size: 16, delay: 1ms } }
                - { link: phone, at: 1s, for: 2s, slow_close: 2s }
                - { link: phone, at: 1s, for: 2s, timeout: 0s }
                - { link: phone, at: 1s, for: 2s, reset_peer: 500ms }
            """
        let kinds = try ScenarioLoader.parse(yaml, file: "n.yaml").network.faults.map(\.kind)
        #expect(kinds == [
            .bandwidth(bytesPerSecond: 1_500_000), .bandwidth(bytesPerSecond: 800), .slicer(size: 16, delay: .milliseconds(1)), .slowClose(.seconds(2)),
            .timeout(.zero), .resetPeer(.milliseconds(500)),
        ])
        func only(_ fault: String) -> String {
            let found = issues("network: { faults: [\(fault)] }")
            return found.count == 1 ? found[0] : "\(found.count) issues: \(found)"
        }
        #expect(only("{ link: phone, at: 1s, for: 2s, bandwidth: fast }").contains("give a rate from 1B/s to 1000MB/s"))
        #expect(only("{ link: phone, at: 1s, for: 2s, bandwidth: 0KB/s }").contains("give a rate"))
        #expect(only("{ link: phone, at: 1s, for: 2s, bandwidth: 5GB/s }").contains("give a rate"))
        #expect(only("{ link: phone, at: 1s, for: 2s, slicer: { size: 0, delay: 1ms } }").contains("slicer.size"))
        #expect(only("{ link: phone, at: 1s, for: 2s, slicer: { size: 8 } }").contains("give size"))
        #expect(only("{ link: phone, at: 1s, for: 2s, reset_peer: 0s }").contains("reset_peer"))
        #expect(only("{ link: phone, at: 1s, for: 2s, slow_close: 2h }").contains("may be at most 1h"))
        #expect(only("{ link: phone, at: 1s, for: 2s, timeout: 1s, reset_peer: 1s }").contains("give one of timeout, reset_peer"))
        #expect(only("{ link: backend_push, at: 1s, for: 2s, bandwidth: 1KB/s }").contains("bandwidth is made by the run's proxy, on the phone link only"))
    }
}
