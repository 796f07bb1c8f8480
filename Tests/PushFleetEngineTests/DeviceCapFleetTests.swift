import PushFleetClients
import PushFleetEmbedded
import PushFleetMetrics
import PushFleetMockPush
import PushFleetResults
import PushFleetTestSupport
import Testing

/// A fleet against a push service at its device cap: the refusal is named, not a timeout, and
/// the devices that did connect get their pushes.
@Suite("Device cap, fleet side")
struct DeviceCapFleetTests {
    @Test("a refusal at the cap is at_capacity; any other refusal keeps its status")
    func label() {
        #expect(BackendClient.label(for: GatewaySocketError.atCapacity(cap: 9_968)) == "at_capacity")
        #expect(BackendClient.label(for: GatewaySocketError.refused(503)) == "refused_503")
        #expect(ErrorClass.deviceCapMarker(9_968) == "push service at its connection cap of 9,968 devices")
        #expect(ErrorClass.deviceCapMarker(1_000_000) == "push service at its connection cap of 1,000,000 devices")
        #expect(ErrorClass.deviceCapMarker(5) == "push service at its connection cap of 5 devices")
    }

    @Test("8 devices with their own sockets against a device cap of 5: 3 refused as connect:at_capacity, one marker with the cap, sends all answered")
    func fleetPastTheCap() async throws {
        var configuration = EmbeddedSystem.Configuration()
        configuration.pushServer.maxDeviceConnections = 5
        try await TestSystem.run(configuration) { (system: TestSystem) async throws in
            let yaml = """
                name: past-cap
                seed: 3
                target: { backend: "\(system.backend)", pns: "\(system.pushService)" }
                fleet: { users: 8, devices_per_user: 1, platforms: { apns: 1 }, push_channel: per_device }
                lifecycle: [login, register, connect, receive]
                traffic: [{ kind: plain, platforms: [apns], rate: 8/s, duration: 1s }]
                deadline: 1s
                grace: 200ms
                """
            let result = try await FleetRunTests.run(yaml)
            #expect(result.devices.ready == 5 && result.devices.failed == 3, "\(result.devices)")
            let classes = Dictionary(uniqueKeysWithValues: result.errors.map { ($0.errorClass, $0.count) })
            #expect((classes[ErrorClass.connectAtCapacity.label] ?? 0) >= 3, "\(classes)")
            #expect(!classes.keys.contains { $0.hasSuffix(":timeout") }, "\(classes)")
            let markers = result.markers.map(\.label).filter { $0.hasPrefix(ErrorClass.deviceCapMarkerPrefix) }
            #expect(markers == ["push service at its connection cap of 5 devices"], "\(result.markers.map(\.label))")
            let sends = result.operations.filter { $0.name == "http.send" }
            #expect(!sends.isEmpty && sends.allSatisfy { $0.failures == 0 }, "\(sends.map { ($0.measure, $0.count, $0.failures) })")
        }
    }
}
