import Foundation
import PushFleetClients
import PushFleetCore
import PushFleetMetrics
import PushFleetWire
import Synchronization

/// One multiplexed gateway connection carrying many devices, each online or offline on its own.
///
/// Devices subscribe through it and wait for the gateway's confirmation; pushes are dispatched
/// by token to their device and handled concurrently in the connection's task group. When to
/// connect, retry and resubscribe is ``GatewayMux``'s to say; this carries its actions out.
final class MuxChannel: Sendable {
    private struct State {
        var machine: GatewayMux
        var devices: [String: VirtualDevice] = [:]
        var waiters: [String: CheckedContinuation<Bool, Never>] = [:]
        /// The live connection's outgoing commands; nil while (re)connecting.
        var sink: AsyncStream<GatewayCommand>.Continuation?

        /// Queues a command for these carried devices on the live connection, if there is one.
        func send(_ op: GatewayCommand.Operation, _ tokens: [String]) {
            let addresses = tokens.compactMap { devices[$0]?.address }
            if !addresses.isEmpty { sink?.yield(GatewayCommand(op: op, devices: addresses)) }
        }
    }

    private let state: Mutex<State>
    let url: String

    /// `seed` draws the reconnect jitter; channels of one run differ so they do not retry in step.
    init(pushServiceURL: String, seed: UInt64 = .random(in: .min ... .max)) {
        url = pushServiceURL.replacingOccurrences(of: "http", with: "ws", options: .anchored) + GatewayFrame.multiplexPath
        state = Mutex(State(machine: GatewayMux(backoff: Backoff(seed: seed))))
    }

    /// Subscribes a device and waits for the gateway to confirm it online (false on timeout or
    /// when the connection is gone).
    func subscribe(_ device: VirtualDevice, timeout: Duration, context: RunContext) async -> Bool {
        let token = device.address.token
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    self.state.withLock { state in
                        state.devices[token] = device
                        state.waiters[token] = continuation
                        if case .subscribe(let tokens) = state.machine.add(token) { state.send(.subscribe, tokens) }
                    }
                }
            }
            group.addTask {
                // On the run's clock, as every other wait of the run.
                try? await context.clock.sleep(until: context.now() + timeout.nanoseconds)
                self.resume(token, with: false)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    func unsubscribe(_ device: VirtualDevice) {
        let token = device.address.token
        state.withLock { state in
            state.devices.removeValue(forKey: token)
            if case .unsubscribe = state.machine.remove(token) {
                state.sink?.yield(GatewayCommand(op: .unsubscribe, devices: [device.address]))
            }
        }
    }

    private func resume(_ token: String, with value: Bool) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: token) }
        waiter?.resume(returning: value)
    }

    /// Holds the connection until the run ends, reconnecting (and resubscribing every device it
    /// carries) when it drops.
    func run(_ context: RunContext) async {
        var action = state.withLock { $0.machine.start(now: context.now()) }
        while true {
            switch action {
            case .connect:
                if Task.isCancelled || context.isStopping {
                    action = state.withLock { $0.machine.stop() }
                } else {
                    action = await connection(context)
                }
            case .retry(let instant, let error):
                // A connection the gateway closed while the run needed it is as much a failure as
                // one that broke: its devices were offline until they were resubscribed.
                if let error = error ?? (context.isStopping ? nil : "closed") { context.emit(.error(.gateway(error), at: context.now())) }
                let due = await context.sleep(until: instant)
                action = state.withLock { due ? $0.machine.retryDue(now: context.now()) : $0.machine.stop() }
            default:
                return
            }
        }
    }

    /// One connection, from the attempt until it ends; returns what the machine says next.
    private func connection(_ context: RunContext) async -> GatewayMux.Action {
        do {
            try await GatewayMuxSocket.connect(url: url, logger: context.logger) { socket in
                try await self.session(socket, context)
            }
            return state.withLock { $0.machine.dropped(nil, now: context.now()) }
        } catch {
            if Task.isCancelled || context.isStopping { return state.withLock { $0.machine.stop() } }
            return state.withLock { $0.machine.dropped(BackendClient.label(for: error), now: context.now()) }
        }
    }

    /// A live connection: resubscribes what it carries, writes queued commands, dispatches pushes.
    private func session(_ socket: GatewayMuxSocket, _ context: RunContext) async throws {
        let (commands, sink) = AsyncStream<GatewayCommand>.makeStream()
        let (carried, renewing) = state.withLock { state in
            state.sink = sink
            switch state.machine.connected(now: context.now()) {
            case .subscribe(let tokens): return (tokens.compactMap { state.devices[$0] }, false)
            case .resubscribe(let tokens): return (tokens.compactMap { state.devices[$0] }, true)
            default: return ([VirtualDevice](), false)
            }
        }
        defer { state.withLock { $0.sink = nil } }
        if !carried.isEmpty { try await socket.send(GatewayCommand(op: .subscribe, devices: carried.map(\.address))) }
        try await withThrowingDiscardingTaskGroup { group in
            // Back after a drop: every device renews its registration, spread over a second so a
            // restarted backend is not hit by all of them at once.
            if renewing && !carried.isEmpty {
                group.addTask { await Self.renew(carried, over: 1_000_000_000, context) }
            }
            group.addTask {
                for await command in commands {
                    try await socket.send(command)
                }
            }
            for try await inbound in socket.frames {
                let receivedAt = context.now()
                switch inbound {
                case .push(let frame):
                    guard let device = self.state.withLock({ $0.devices[frame.token] }) else { continue }
                    context.pushArrived(at: receivedAt)
                    group.addTask { await device.receive(frame, at: receivedAt, context: context) }
                case .notice(let notice):
                    self.handle(notice, group: &group, context: context)
                case .garbage:
                    context.emit(.error(.gatewayBadFrame, at: receivedAt))
                }
            }
            throw CancellationError()
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
            let action = state.withLock { $0.machine.takenOffline(notice.devices.map(\.token), now: context.now()) }
            guard case .resubscribeAt(let instant, let tokens) = action else { return }
            group.addTask {
                guard await context.sleep(until: instant) else { return }
                self.state.withLock { state in
                    if case .subscribe(let still) = state.machine.pauseEnded(tokens) { state.send(.subscribe, still) }
                }
            }
        case .error:
            context.emit(.error(.gatewayErrorNotice, at: context.now()))
        default:
            break
        }
    }
}
