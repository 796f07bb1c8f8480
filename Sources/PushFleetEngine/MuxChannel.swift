import Foundation
import HummingbirdWSClient
import Logging
import NIOWebSocket
import PushFleetCore
import PushFleetWire
import Synchronization
import PushFleetClients
import PushFleetMetrics

/// One multiplexed gateway connection carrying many devices, each online or offline on its own.
///
/// Devices subscribe through it and wait for the gateway's confirmation; pushes are dispatched
/// by token to their device and handled concurrently in the connection's task group.
final class MuxChannel: Sendable {
    private struct State {
        var devices: [String: VirtualDevice] = [:]
        var waiters: [String: CheckedContinuation<Bool, Never>] = [:]
        /// The live connection's outgoing commands; nil while (re)connecting.
        var sink: AsyncStream<String>.Continuation?
    }

    private let state = Mutex(State())
    let url: String

    init(pushServiceURL: String) {
        url = pushServiceURL.replacingOccurrences(of: "http", with: "ws", options: .anchored) + GatewayFrame.multiplexPath
    }

    /// Sends a command on the live connection. Without one, nothing is lost: a connection
    /// resubscribes every device it carries when it comes up.
    private func send(_ text: String) {
        _ = state.withLock { $0.sink?.yield(text) }
    }

    /// Subscribes a device and waits for the gateway to confirm it online (false on timeout or
    /// when the connection is gone).
    func subscribe(_ device: VirtualDevice, timeout: Duration) async -> Bool {
        let text = Self.command(.subscribe, [device.address])
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    self.state.withLock {
                        $0.devices[device.address.token] = device
                        $0.waiters[device.address.token] = continuation
                    }
                    self.send(text)
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                self.resume(device.address.token, with: false)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    func unsubscribe(_ device: VirtualDevice) {
        _ = state.withLock { $0.devices.removeValue(forKey: device.address.token) }
        send(Self.command(.unsubscribe, [device.address]))
    }

    private func resume(_ token: String, with value: Bool) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: token) }
        waiter?.resume(returning: value)
    }

    private static func command(_ op: GatewayCommand.Operation, _ devices: [DeviceAddress]) -> String {
        String(decoding: (try? JSONEncoder().encode(GatewayCommand(op: op, devices: devices))) ?? Data(), as: UTF8.self)
    }

    /// Holds the connection until the run ends, reconnecting (and resubscribing every device it
    /// carries) when it drops.
    func run(_ context: RunContext) async {
        var backoff = Backoff(seed: context.scenario.seed ^ UInt64(UInt(bitPattern: ObjectIdentifier(self).hashValue)))
        while !Task.isCancelled && !context.isStopping {
            let attempt = context.now()
            do {
                try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: 16 << 20), logger: context.logger) {
                    inbound, outbound, _ in
                    let (commands, sink) = AsyncStream<String>.makeStream()
                    let carried = self.state.withLock { state in
                        state.sink = sink
                        return Array(state.devices.values)
                    }
                    defer { self.state.withLock { $0.sink = nil } }
                    if !carried.isEmpty { try await outbound.write(.text(Self.command(.subscribe, carried.map(\.address)))) }
                    try await withThrowingDiscardingTaskGroup { group in
                        // Back after a drop: every device renews its registration, spread over a
                        // second so a restarted backend is not hit by all of them at once.
                        if !carried.isEmpty {
                            group.addTask { await Self.renew(carried, over: 1_000_000_000, context) }
                        }
                        group.addTask {
                            for await text in commands {
                                try await outbound.write(.text(text))
                            }
                        }
                        for try await message in inbound.messages(maxSize: 16 << 20) {
                            guard case .text(let text) = message else { continue }
                            let receivedAt = context.now()
                            switch GatewayInbound(text) {
                            case .push(let frame):
                                guard let device = self.state.withLock({ $0.devices[frame.token] }) else { continue }
                                context.pushArrived(at: receivedAt)
                                group.addTask { await device.receive(frame, at: receivedAt, context: context) }
                            case .notice(let notice):
                                self.handle(notice, group: &group, context: context)
                            case .garbage:
                                context.emit(.error("gateway:bad_frame", at: receivedAt))
                            }
                        }
                        throw CancellationError()
                    }
                }
            } catch {
                if Task.isCancelled || context.isStopping { return }
                context.emit(.error("gateway:\(BackendClient.label(for: error))", at: context.now()))
            }
            // A connection that held for a while starts the backoff afresh.
            if context.now() - attempt > 10_000_000_000 { backoff.reset() }
            guard await context.sleep(until: context.now() + backoff.next()) else { return }
        }
    }

    /// Renews the devices' registrations, started evenly over `span` nanoseconds.
    static func renew(_ devices: [VirtualDevice], over span: Int64, _ context: RunContext) async {
        let began = context.now()
        await withDiscardingTaskGroup { group in
            for (index, device) in devices.enumerated() {
                let due = began + span * Int64(index) / Int64(devices.count)
                if due > context.now() + 1_000_000 {
                    guard await context.sleep(until: due) else { return }
                }
                group.addTask { await device.renewRegistration(context) }
            }
        }
    }

    private func handle(_ notice: GatewayNotice, group: inout ThrowingDiscardingTaskGroup<any Error>, context: RunContext) {
        switch notice.type {
        case .subscribed:
            for device in notice.devices { resume(device.token, with: true) }
        case .disconnected:
            // Taken offline by the service: come back after a pause, as a phone does.
            let devices = notice.devices
            group.addTask {
                guard await context.sleep(until: context.now() + 200_000_000) else { return }
                let still = self.state.withLock { state in devices.filter { state.devices[$0.token] != nil } }
                if !still.isEmpty { self.send(Self.command(.subscribe, still)) }
            }
        case .error:
            context.emit(.error("gateway:error_notice", at: context.now()))
        default:
            break
        }
    }
}
