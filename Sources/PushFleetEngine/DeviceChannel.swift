import Foundation
import PushFleetCore
import PushFleetWire
import PushFleetClients
import PushFleetMetrics

extension VirtualDevice {
    /// One connection attempt; true once the gateway has the device online. The socket then
    /// lives on in NIO: pushes and reconnections reach the fleet through `DeviceWork`, so no task
    /// waits for the device between pushes.
    func openChannel(_ context: RunContext) async -> Bool {
        let uri = "\(GatewayFrame.devicePath)?platform=\(address.platform.rawValue)&token=\(address.token)"
        do {
            let socket = try await GatewaySocket.open(
                host: context.gateway.host, port: context.gateway.port, uri: uri, group: context.eventLoops,
                source: context.sourceAddress(plan.index), timeout: context.scenario.timeouts.connect
            ) { inbound, _ in
                // Timed on the run's clock, the one every other instant of the run is on.
                let receivedAt = context.now()
                switch inbound {
                case .push(let frame):
                    context.pushArrived(at: receivedAt)
                    context.deviceWork.submit(.push(self, frame, receivedAt))
                case .garbage: context.emit(.error(.gatewayBadFrame, at: receivedAt))
                case .notice: break
                }
            }
            adopt(socket, context)
            return true
        } catch {
            if !context.isStopping {
                context.emit(.error(.connect(BackendClient.label(for: error)), at: context.now()))
                if case GatewaySocketError.atCapacity(let cap) = error { context.markDeviceCap(cap) }
            }
            return false
        }
    }
}

/// Work that per-device sockets' NIO callbacks hand to the fleet's task group: pushes to handle
/// and reconnections.
final class DeviceWork: Sendable {
    enum Item: Sendable {
        case push(VirtualDevice, PushFrame, Int64)
        case reconnect(VirtualDevice)
    }

    private let stream: AsyncStream<Item>
    private let sink: AsyncStream<Item>.Continuation

    init() {
        (stream, sink) = AsyncStream<Item>.makeStream()
    }

    func submit(_ item: Item) { sink.yield(item) }

    /// Runs each item as a child task until cancelled.
    func run(_ context: RunContext) async {
        await withDiscardingTaskGroup { group in
            for await item in stream {
                switch item {
                case .push(let device, let frame, let receivedAt):
                    group.addTask { await device.receive(frame, at: receivedAt, context: context) }
                case .reconnect(let device):
                    group.addTask { await device.reconnect(context) }
                }
            }
        }
    }
}
