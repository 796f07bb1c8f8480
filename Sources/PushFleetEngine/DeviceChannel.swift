import Foundation
import PushFleetCore
import PushFleetWire
import PushFleetClients
import PushFleetMetrics

extension VirtualDevice {
    /// The life of a device with its own WebSocket from its arrival: log in, connect, register.
    /// The socket then lives on in NIO; pushes and reconnections reach the fleet through
    /// `DeviceWork`, so no task waits for the device between pushes.
    func runWithOwnChannel(_ context: RunContext, setup: SetupTracker) async {
        var setupDone = false
        defer { if !setupDone { setup.finished() } }
        guard !context.isStopping else { return }
        let steps = context.scenario.lifecycle
        guard await logIn(context) else { return }
        guard steps.contains(.connect) else {
            var ok = true
            if steps.contains(.register) { ok = await register(context) }
            context.emit(ok ? .deviceReady(plan.index, at: context.now()) : .deviceFailed(plan.index, at: context.now()))
            return
        }
        let connectStart = context.now()
        var attempts = 0
        while await !openChannel(context) {
            attempts += 1
            guard !context.isStopping else { return }
            if attempts >= 3 || context.now() - connectStart > context.scenario.timeouts.connect.nanoseconds {
                context.emit(.deviceFailed(plan.index, at: context.now()))
                return
            }
            guard await context.sleep(until: context.now() + 200_000_000) else { return }
        }
        context.emit(.operation(metric: MetricName.connect, nanoseconds: context.now() - connectStart, failed: false, at: context.now()))
        var registered = true
        if steps.contains(.register) { registered = await register(context) }
        if registered && plan.probe { await probeTagSpoof(context) }
        context.emit(registered ? .deviceReady(plan.index, at: context.now()) : .deviceFailed(plan.index, at: context.now()))
        setupDone = true
        setup.finished()
        if !registered { retireChannel() }
    }

    /// One connection attempt; true once the gateway has the device online.
    func openChannel(_ context: RunContext) async -> Bool {
        let uri = "\(GatewayFrame.devicePath)?platform=\(address.platform.rawValue)&token=\(address.token)"
        do {
            let socket = try await GatewaySocket.open(
                host: context.gateway.host, port: context.gateway.port, uri: uri, group: context.eventLoops,
                source: context.sourceAddress(plan.index), timeout: context.scenario.timeouts.connect
            ) { inbound, receivedAt in
                switch inbound {
                case .push(let frame):
                    context.pushArrived(at: receivedAt)
                    context.deviceWork.submit(.push(self, frame, receivedAt))
                case .garbage: context.emit(.error("gateway:bad_frame", at: receivedAt))
                case .notice: break
                }
            }
            adopt(socket, context)
            return true
        } catch {
            if !context.isStopping { context.emit(.error("connect:\(BackendClient.label(for: error))", at: context.now())) }
            return false
        }
    }

    /// After a drop by the service: come back with exponential backoff and jitter, as a phone
    /// does, until the run stops; then renew the registration, which a restarted backend may
    /// have lost.
    func reconnect(_ context: RunContext) async {
        var backoff = Backoff(seed: context.scenario.seed ^ UInt64(plan.index) &* 0x9E37_79B9_7F4A_7C15)
        while await context.sleep(until: context.now() + backoff.next()), !channelRetired {
            if await openChannel(context) {
                await renewRegistration(context)
                return
            }
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
