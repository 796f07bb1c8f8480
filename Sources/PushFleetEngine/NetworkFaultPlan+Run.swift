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

    /// The plan for a run: its devices, seed, run id and servers.
    init(scenario: Scenario, plan: FleetPlan, endpoints: Endpoints) {
        self.init(
            faults: scenario.network.faults, devices: plan.devices.count, seed: scenario.seed, runID: plan.runID,
            pid: getpid(), instance: Self.instances.add(1, ordering: .relaxed).newValue, endpoints: endpoints
        )
    }

    /// The addresses the `backend_push` and `fleet_backend` rules match: the push service's
    /// listeners and the backend's, each at an IPv4 address. Only the faulted links' ends must be.
    static func endpoints(of system: SystemUnderTest, faults: [Scenario.NetworkFault]) throws -> Endpoints {
        let push = try gateway(system.pushService)
        var ports = [push.port ?? 0]
        for listener in system.pushServiceListeners where faults.contains(where: { $0.link == .backendPush }) {
            let address = try ipv4(listener, what: "the push service's listener")
            guard address.ipAddress == push.ipAddress else {
                throw UnsupportedGateway(description: "network faults: the push service's listener \(listener) is not at its address \(push.ipAddress ?? "")")
            }
            if let port = address.port, !ports.contains(port) { ports.append(port) }
        }
        let backend = try faults.contains { $0.link == .fleetBackend } ? ipv4(system.backend, what: "the backend") : SocketAddress(ipAddress: "127.0.0.1", port: 0)
        return Endpoints(
            pushServiceHost: push.ipAddress ?? "127.0.0.1", pushServicePorts: ports, backendHost: backend.ipAddress ?? "127.0.0.1", backendPort: backend.port ?? 0
        )
    }

    private static func ipv4(_ url: String, what: String) throws -> SocketAddress {
        guard let origin = Origin(url) else { throw UnsupportedGateway(description: "network faults: cannot read \(what)'s URL \(url)") }
        guard let address = try? SocketAddress(ipAddress: origin.host == "localhost" ? "127.0.0.1" : origin.host, port: origin.port),
            address.protocol == .inet
        else {
            throw UnsupportedGateway(description: "network faults match links by IPv4 address: give \(what) as one (it is at \(origin.host))")
        }
        return address
    }

    /// Where devices' own sockets go: the push service, at an IPv4 address as the devices'
    /// addresses are.
    static func gateway(_ pushServiceURL: String) throws -> SocketAddress {
        try ipv4(pushServiceURL, what: "the push service")
    }

    /// A proxy on the phone link in front of the push service's gateway.
    func startProxy(gateway: SocketAddress, seed: UInt64) async throws -> PhoneLinkProxy {
        try await PhoneLinkProxy.start(
            group: MultiThreadedEventLoopGroup.singleton, upstream: gateway, source: try SocketAddress(ipAddress: fleetAddress, port: 0), plan: self, seed: seed
        )
    }

    /// Runs of one process (tests run several at once) each get a table of their own.
    private static let instances = Atomic<Int>(0)
}
