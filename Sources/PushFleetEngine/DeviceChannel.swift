import Foundation
import NIOCore
import PushFleetCore
import PushFleetWire
import PushFleetClients
import PushFleetMetrics
import Synchronization

extension VirtualDevice {
    /// One connection attempt; true once the gateway has the device online. The socket then
    /// lives on in NIO: pushes and reconnections reach the fleet through `DeviceWork`, so no task
    /// waits for the device between pushes.
    func openChannel(_ context: RunContext) async -> Bool {
        // With a keepalive the device also acknowledges pushes, as phones' push clients do.
        let keepalive = keepalive(context)
        let uri = "\(GatewayFrame.devicePath)?platform=\(address.platform.rawValue)&token=\(address.token)" + (keepalive?.acks == true ? "&ack=1" : "")
        do {
            let socket = try await GatewaySocket.open(
                host: context.services.gateway.host, port: context.services.gateway.port, uri: uri, group: context.services.eventLoops,
                source: context.services.gatewaySource(plan.index), timeout: context.spec.scenario.timeouts.connect,
                keepalive: keepalive
            ) { inbound, _ in
                // Timed on the run's clock, the one every other instant of the run is on.
                let receivedAt = context.now()
                switch inbound {
                case .push(let frame):
                    // A push whose acknowledgement a dead link lost comes again on the next
                    // connection; the push client drops it, as phones' do (by message).
                    if let recent = self.recentPushes, let number = frame.push, frame.type != PushFrame.refusedType, !recent.firstTime(number) {
                        context.emit(.operation(metric: MetricName.phoneRedelivered, nanoseconds: 0, failed: false, at: receivedAt))
                        return
                    }
                    context.signals.pushArrived(at: receivedAt)
                    context.services.deviceWork.submit(.push(self, frame, receivedAt))
                case .garbage: context.emit(.error(.gatewayBadFrame, at: receivedAt))
                case .notice(let notice):
                    if notice.type == .subscribed { self.gatewayNotice(notice, context, at: receivedAt) }
                }
            }
            adopt(socket, context)
            return true
        } catch {
            if !context.isStopping {
                context.emit(.error(.connect(BackendClient.label(for: error)), at: context.now()))
                if case GatewaySocketError.atCapacity(let cap) = error { context.signals.markDeviceCap(cap, at: context.now()) }
            }
            return false
        }
    }
}

extension VirtualDevice {
    /// The scenario's keepalive for this device's socket: a silent socket is given up, and
    /// how long that took is measured (docs/network-faults.md).
    func keepalive(_ context: RunContext) -> GatewayKeepalive? {
        guard let keepalive = context.spec.scenario.network.keepalive else { return nil }
        let device = plan.index
        return GatewayKeepalive(ping: keepalive.ping.nanoseconds, deadAfter: keepalive.deadAfter.nanoseconds, acks: keepalive.acks) { silent in
            let now = context.now()
            context.emit(.operation(metric: MetricName.phoneDeadLink, nanoseconds: silent, failed: false, at: now))
            // From the partition that cut it off, when one did: the time the device took to notice.
            let trafficStart = context.signals.trafficStart.load(ordering: .relaxed)
            guard let network = context.services.network, trafficStart > 0 else { return }
            let offset = Duration.nanoseconds(now - trafficStart)
            if let start = network.partitionStart(device: device, at: offset, slack: keepalive.deadAfter) {
                context.emit(.operation(metric: MetricName.phoneDeadLinkNotice, nanoseconds: now - trafficStart - start.nanoseconds, failed: false, at: now))
            }
        }
    }
}

extension VirtualDevice {
    /// The gateway's side of a dead link: when it closed the device's socket that a partition
    /// cut, as its `subscribed` on the next connection says (docs/network-faults.md).
    func gatewayNotice(_ notice: GatewayNotice, _ context: RunContext, at now: Int64) {
        let trafficStart = context.signals.trafficStart.load(ordering: .relaxed)
        guard let network = context.services.network, trafficStart > 0,
            let phase = network.partitionPhase(device: plan.index, at: .nanoseconds(now - trafficStart), slack: Self.comebackWithin)
        else { return }
        let start = trafficStart + phase.start.nanoseconds
        if let since = notice.offlineSince {
            let closed = context.time.onRunClock(wall: since)
            // Closed before the partition: not the dead link's doing.
            guard closed >= start else { return }
            if closed <= trafficStart + phase.end.nanoseconds {
                context.emit(.operation(metric: MetricName.gatewayDeadLinkNotice, nanoseconds: closed - start, failed: false, at: now))
                return
            }
        } else if notice.tookOver != true {
            return
        }
        // The socket outlived the partition: the gateway learnt of its end only after the heal
        // (the device's close getting through), or not at all (taken over).
        context.emit(.operation(metric: MetricName.gatewayDeadLinkNotice, nanoseconds: now - start, failed: true, at: now))
    }

    /// How long after a partition's heal a device's return still counts as coming back from it.
    static let comebackWithin = Duration.seconds(60)
}

/// The push numbers a device that acknowledges pushes received last. The push service hands
/// back what a connection swallowed unacknowledged when it ends (docs/network-faults.md), so a
/// push the device got whose acknowledgement was lost (a reset, a one-way partition) comes again
/// with the same number; the device drops it, as a phone's push client drops a message id it
/// already has, rather than count the service's redelivery against the backend as a duplicate.
final class RecentPushes: Sendable {
    /// How many it keeps: more than a connection has unacknowledged at its end in practice
    /// (each push is acknowledged as it arrives).
    static let kept = 64
    private let state = Mutex<(ring: [UInt64], next: Int)>(([], 0))

    /// True the first time `push` arrives.
    func firstTime(_ push: UInt64) -> Bool {
        state.withLock { state in
            if state.ring.contains(push) { return false }
            if state.ring.count < Self.kept {
                state.ring.append(push)
            } else {
                state.ring[state.next] = push
                state.next = (state.next + 1) % Self.kept
            }
            return true
        }
    }
}

/// Work that per-device sockets' NIO callbacks hand to the fleet's tasks: pushes to handle and
/// reconnections. One queue per event loop, its items handled by a task on that loop: a push
/// read on a loop is handled there, and its fetch goes out on a connection of the same loop, so
/// no other thread is woken between the frame and the fetch's answer.
final class DeviceWork: Sendable {
    enum Item: Sendable {
        case push(VirtualDevice, PushFrame, Int64)
        case reconnect(VirtualDevice)
    }

    private struct Queue: Sendable {
        var loop: any EventLoop
        var items: WorkQueue<Item>
    }

    private let queues: [Queue]

    init(loops: any EventLoopGroup) {
        queues = loops.makeIterator().map { loop in Queue(loop: loop, items: WorkQueue()) }
    }

    /// Queues an item on the queue of the loop it comes from (the first queue from elsewhere).
    func submit(_ item: Item) {
        let here = EventLoopExecutor.current
        let queue = queues.first { $0.loop === here } ?? queues[0]
        queue.items.push(item)
    }

    /// Runs each item as a child task, on its queue's loop, until cancelled.
    func run(_ context: RunContext) async {
        await withDiscardingTaskGroup { loops in
            for queue in queues {
                loops.addTask(executorPreference: EventLoopExecutor(queue.loop)) {
                    await withDiscardingTaskGroup { group in
                        while let item = await queue.items.next() {
                            switch item {
                            case .push(let device, let frame, let receivedAt):
                                // Runs here until its first wait (the fetch).
                                group.addImmediateTask { await device.receive(frame, at: receivedAt, context: context) }
                            case .reconnect(let device):
                                // Reconnections come in storms (a restarted push service):
                                // on Swift's pool, where they cannot hold up the loops' I/O.
                                group.addTask(executorPreference: globalConcurrentExecutor) { await device.reconnect(context) }
                            }
                        }
                    }
                }
            }
        }
    }
}
