import Foundation
import NIOCore
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
    /// A device waiting for the gateway to confirm it online, until `deadline` (run clock).
    private struct Waiter {
        var continuation: CheckedContinuation<Bool, Never>
        var deadline: Int64
    }

    private struct State {
        var machine: GatewayMux
        /// Sharded: it holds every device the channel carries, grown on the run's loops.
        var devices = ShardedDictionary<String, VirtualDevice>()
        var waiters: [String: Waiter] = [:]
        /// Commands the live connection's writer has yet to write.
        var outbox: [GatewayCommand] = []
        /// Wakes the live connection's writer; nil while (re)connecting, when commands would be
        /// moot (the machine resubscribes what the channel carries once it is back).
        var wake: AsyncStream<Void>.Continuation?
        /// The channel is closed for good: subscriptions fail at once.
        var ended = false

        /// Queues a command for these carried devices on the live connection, if there is one.
        /// Devices arriving together share a frame: one command per run of the same operation,
        /// up to ``MuxChannel/batch`` devices, whatever queued while the writer was writing.
        mutating func send(_ op: GatewayCommand.Operation, _ tokens: [String]) {
            guard let wake else { return }
            let addresses = tokens.compactMap { devices[$0]?.address }
            guard !addresses.isEmpty else { return }
            if let last = outbox.indices.last, outbox[last].op == op, let queued = outbox[last].devices,
                queued.count + addresses.count <= MuxChannel.batch
            {
                outbox[last].devices = queued + addresses
            } else {
                outbox.append(GatewayCommand(op: op, devices: addresses))
            }
            wake.yield()
        }
    }

    /// Devices in one subscribe or unsubscribe frame, at most.
    static let batch = 256
    /// How often subscriptions past their timeout are failed.
    static let sweep: Int64 = 100_000_000

    private let state: Mutex<State>
    let url: String
    /// The event loop the connection lives on; ``run(_:)`` runs there, so a push is read,
    /// handled and fetched on one thread.
    let loop: any EventLoop

    /// `seed` draws the reconnect jitter; channels of one run differ so they do not retry in step.
    init(pushServiceURL: String, loop: any EventLoop, seed: UInt64 = .random(in: .min ... .max)) {
        self.loop = loop
        url = pushServiceURL.replacingOccurrences(of: "http", with: "ws", options: .anchored) + GatewayFrame.multiplexPath
        state = Mutex(State(machine: GatewayMux(backoff: Backoff(seed: seed))))
    }

    /// Subscribes a device and waits for the gateway to confirm it online (false on timeout or
    /// when the connection is gone). The wait is a continuation, not a task: one sweep per
    /// channel fails those past their timeout.
    func subscribe(_ device: VirtualDevice, timeout: Duration, context: RunContext) async -> Bool {
        let token = device.address.token
        let deadline = context.now() + timeout.nanoseconds
        return await withCheckedContinuation { continuation in
            let (ended, previous) = state.withLock { state -> (Bool, Waiter?) in
                if state.ended { return (true, nil) }
                state.devices[token] = device
                let previous = state.waiters.updateValue(Waiter(continuation: continuation, deadline: deadline), forKey: token)
                if case .subscribe(let tokens) = state.machine.add(token) { state.send(.subscribe, tokens) }
                return (false, previous)
            }
            previous?.continuation.resume(returning: false)
            if ended { continuation.resume(returning: false) }
        }
    }

    func unsubscribe(_ device: VirtualDevice) {
        let token = device.address.token
        state.withLock { state in
            if case .unsubscribe(let tokens) = state.machine.remove(token) { state.send(.unsubscribe, tokens) }
            state.devices.removeValue(forKey: token)
        }
    }

    private func resume(_ token: String, with value: Bool) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: token) }
        waiter?.continuation.resume(returning: value)
    }

    /// Fails the subscriptions past their timeout, every ``sweep`` of the run's clock.
    private func expireSubscriptions(_ context: RunContext) async {
        while !Task.isCancelled {
            do { try await context.clock.sleep(until: context.now() + Self.sweep) } catch { return }
            let now = context.now()
            let expired = state.withLock { state -> [Waiter] in
                let due = state.waiters.filter { $0.value.deadline <= now }
                for token in due.keys { state.waiters[token] = nil }
                return Array(due.values)
            }
            for waiter in expired { waiter.continuation.resume(returning: false) }
        }
    }

    /// Holds the connection until the run ends, reconnecting (and resubscribing every device it
    /// carries) when it drops.
    func run(_ context: RunContext) async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.expireSubscriptions(context) }
            await connectAndRetry(context)
            group.cancelAll()
        }
        let waiting = state.withLock { state in
            state.ended = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiting { waiter.continuation.resume(returning: false) }
    }

    private func connectAndRetry(_ context: RunContext) async {
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
            try await GatewayMuxSocket.connect(url: url, on: loop, logger: context.services.logger) { socket in
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
        let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let (carried, renewing) = state.withLock { state in
            state.outbox = []
            state.wake = wake
            switch state.machine.connected(now: context.now()) {
            case .subscribe(let tokens): return (tokens.compactMap { state.devices[$0] }, false)
            case .resubscribe(let tokens): return (tokens.compactMap { state.devices[$0] }, true)
            default: return ([VirtualDevice](), false)
            }
        }
        defer {
            state.withLock { state in
                state.wake = nil
                state.outbox = []
            }
            wake.finish()
        }
        // In frames of at most `batch` devices: a whole channel's worth would pass the gateway's
        // frame limit.
        for start in stride(from: 0, to: carried.count, by: Self.batch) {
            try await socket.send(GatewayCommand(op: .subscribe, devices: carried[start..<min(carried.count, start + Self.batch)].map(\.address)))
        }
        try await withThrowingDiscardingTaskGroup { group in
            // Back after a drop: every device renews its registration, spread over a second so a
            // restarted backend is not hit by all of them at once, and on Swift's pool so that
            // the storm does not hold up the loop's pushes.
            if renewing && !carried.isEmpty {
                group.addTask(executorPreference: globalConcurrentExecutor) { await Self.renew(carried, over: 1_000_000_000, context) }
            }
            group.addTask {
                for await _ in wakes {
                    let commands = self.state.withLock { state in
                        defer { state.outbox = [] }
                        return state.outbox
                    }
                    for command in commands { try await socket.send(command) }
                }
            }
            for try await inbound in socket.frames {
                let receivedAt = context.now()
                switch inbound {
                case .push(let frame):
                    guard let device = self.state.withLock({ $0.devices[frame.token] }) else { continue }
                    context.signals.pushArrived(at: receivedAt)
                    // Runs here until its first wait (the fetch): no other thread is woken for it.
                    group.addImmediateTask { await device.receive(frame, at: receivedAt, context: context) }
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
