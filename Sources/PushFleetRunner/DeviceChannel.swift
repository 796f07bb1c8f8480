import Foundation
import HummingbirdWSClient
import Logging
import NIOWebSocket
import PushFleetCore
import PushFleetWire
import Synchronization

/// Push frames are small; anything larger than this from the gateway is refused.
let maxGatewayFrame = 1 << 20

/// Decodes a gateway text frame into a push, or a notice.
enum GatewayInbound {
    case push(PushFrame)
    case notice(GatewayNotice)
    case garbage

    /// Pushes, the hot case, take one decode; notices do not have a push's fields and fall through.
    init(_ text: String) {
        let data = Data(text.utf8)
        if let frame = try? JSONDecoder().decode(PushFrame.self, from: data), frame.type == "push" {
            self = .push(frame)
        } else if let notice = try? JSONDecoder().decode(GatewayNotice.self, from: data) {
            self = .notice(notice)
        } else {
            self = .garbage
        }
    }
}

extension VirtualDevice {
    /// The whole life of a device with its own WebSocket from its arrival: log in, connect,
    /// register, then receive until the run ends, reconnecting when the service drops the
    /// connection.
    func runWithOwnChannel(_ context: RunContext, setup: SetupTracker) async {
        let flags = ChannelFlags()
        defer { if !flags.setupDone.load(ordering: .relaxed) { setup.finished() } }
        guard !context.isStopping else { return }
        let steps = context.scenario.lifecycle
        guard await logIn(context) else { return }
        guard steps.contains(.connect) else {
            var ok = true
            if steps.contains(.register) { ok = await register(context) }
            context.emit(ok ? .deviceReady(plan.index, at: context.now()) : .deviceFailed(plan.index, at: context.now()))
            return
        }
        let url = context.pushServiceURL.replacingOccurrences(of: "http", with: "ws", options: .anchored)
            + "\(GatewayFrame.devicePath)?platform=\(address.platform.rawValue)&token=\(address.token)"
        var attempts = 0
        while !context.isStopping && !Task.isCancelled && !hasDeparted && !flags.failed.load(ordering: .relaxed) {
            let connectStart = context.now()
            let alreadyConnected = flags.connected.load(ordering: .relaxed)
            do {
                try await WebSocketClient.connect(
                    url: url, configuration: .init(maxFrameSize: maxGatewayFrame), logger: context.logger
                ) { inbound, outbound, _ in
                    var messages = inbound.messages(maxSize: maxGatewayFrame).makeAsyncIterator()
                    // Held pushes come first, then the online confirmation.
                    online: while let message = try await messages.next() {
                        guard case .text(let text) = message else { continue }
                        switch GatewayInbound(text) {
                        case .push(let frame): await self.receive(frame, at: context.now(), context: context)
                        case .notice(let notice) where notice.type == .subscribed: break online
                        default: continue
                        }
                    }
                    flags.connected.store(true, ordering: .relaxed)
                    if !alreadyConnected {
                        context.emit(.operation(metric: MetricName.connect, nanoseconds: context.now() - connectStart, failed: false, at: context.now()))
                        var registered = true
                        if steps.contains(.register) { registered = await self.register(context) }
                        if registered && self.plan.probe { await self.probeTagSpoof(context) }
                        context.emit(registered ? .deviceReady(self.plan.index, at: context.now()) : .deviceFailed(self.plan.index, at: context.now()))
                        flags.setupDone.store(true, ordering: .relaxed)
                        setup.finished()
                        guard registered else {
                            flags.failed.store(true, ordering: .relaxed)
                            return
                        }
                    }
                    while let message = try await messages.next() {
                        if self.hasDeparted { break }
                        guard case .text(let text) = message, case .push(let frame) = GatewayInbound(text) else { continue }
                        await self.receive(frame, at: context.now(), context: context)
                    }
                    try? await outbound.close(.normalClosure, reason: nil)
                }
            } catch {
                if !context.isStopping && !Task.isCancelled {
                    context.emit(.error("connect:\(BackendClient.label(for: error))", at: context.now()))
                }
            }
            if !flags.connected.load(ordering: .relaxed) {
                attempts += 1
                if attempts >= 3 || context.now() - connectStart > context.scenario.timeouts.connect.nanoseconds {
                    context.emit(.deviceFailed(plan.index, at: context.now()))
                    return
                }
            }
            // Dropped by the service: come back after a short pause, as a phone does.
            guard await context.sleep(until: context.now() + 200_000_000) else { return }
        }
    }
}

/// Progress of one device's channel, shared with its connection handler.
final class ChannelFlags: Sendable {
    let connected = Atomic<Bool>(false)
    let setupDone = Atomic<Bool>(false)
    let failed = Atomic<Bool>(false)
}
