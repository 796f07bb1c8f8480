import Foundation
import NIOCore
import NIOPosix
import Synchronization
import PushFleetClients
import PushFleetCore

extension NetworkFaultPlan {
    struct UnsupportedGateway: Error, CustomStringConvertible {
        var description: String
    }

    /// The plan for a run: its devices, seed and run id. The push service must be at an IPv4
    /// address, as the devices' addresses are.
    init(scenario: Scenario, plan: FleetPlan, pushServiceURL: String) throws {
        guard let origin = Origin(pushServiceURL) else { throw UnsupportedGateway(description: "network faults: cannot read the push service's URL \(pushServiceURL)") }
        let host = origin.host == "localhost" ? "127.0.0.1" : origin.host
        guard host.split(separator: ".").count == 4, host.split(separator: ".").allSatisfy({ UInt8($0) != nil }) else {
            throw UnsupportedGateway(description: "network faults need the push service at an IPv4 address (devices bind 127.x addresses); it is at \(origin.host)")
        }
        self.init(
            faults: scenario.network.faults, devices: plan.devices.count, seed: scenario.seed, runID: plan.runID,
            pid: getpid(), instance: Self.instances.add(1, ordering: .relaxed).newValue
        )
    }

    /// A proxy on the phone link in front of the push service's gateway.
    func startProxy(pushServiceURL: String, seed: UInt64) async throws -> PhoneLinkProxy {
        guard let origin = Origin(pushServiceURL) else { throw UnsupportedGateway(description: "network faults: cannot read the push service's URL \(pushServiceURL)") }
        let upstream = try SocketAddress(ipAddress: origin.host == "localhost" ? "127.0.0.1" : origin.host, port: origin.port)
        return try await PhoneLinkProxy.start(group: MultiThreadedEventLoopGroup.singleton, upstream: upstream, plan: self, seed: seed)
    }

    /// Runs of one process (tests run several at once) each get a table of their own.
    private static let instances = Atomic<Int>(0)
}
