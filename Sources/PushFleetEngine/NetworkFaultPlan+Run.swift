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

    /// The plan for a run: its devices, seed and run id.
    init(scenario: Scenario, plan: FleetPlan) {
        self.init(
            faults: scenario.network.faults, devices: plan.devices.count, seed: scenario.seed, runID: plan.runID,
            pid: getpid(), instance: Self.instances.add(1, ordering: .relaxed).newValue
        )
    }

    /// Where devices' own sockets go: the push service, at an IPv4 address as the devices'
    /// addresses are.
    static func gateway(_ pushServiceURL: String) throws -> SocketAddress {
        guard let origin = Origin(pushServiceURL) else { throw UnsupportedGateway(description: "network faults: cannot read the push service's URL \(pushServiceURL)") }
        guard let address = try? SocketAddress(ipAddress: origin.host == "localhost" ? "127.0.0.1" : origin.host, port: origin.port),
            address.protocol == .inet
        else {
            throw UnsupportedGateway(description: "network faults need the push service at an IPv4 address (devices bind 127.x addresses); it is at \(origin.host)")
        }
        return address
    }

    /// A proxy on the phone link in front of the push service's gateway.
    func startProxy(gateway: SocketAddress, seed: UInt64) async throws -> PhoneLinkProxy {
        try await PhoneLinkProxy.start(group: MultiThreadedEventLoopGroup.singleton, upstream: gateway, plan: self, seed: seed)
    }

    /// Runs of one process (tests run several at once) each get a table of their own.
    private static let instances = Atomic<Int>(0)
}
