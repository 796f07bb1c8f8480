import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PushFleetClients
import PushFleetLedger
import PushFleetMetrics
import PushFleetCore
import PushFleetWire
import Synchronization

/// What every device and sender of one run shares, by concern: what it plays (``RunSpec``), its
/// clock (``RunTime``), what its tasks tell each other (``RunSignals``) and its ways to the
/// system under test (``FleetServices``). The few things nearly every file does (read the
/// clock, emit an event, wait, ask whether to start work) are said here once.
final class RunContext: Sendable {
    let spec: RunSpec
    let time: RunTime
    let signals: RunSignals
    let services: FleetServices

    init(spec: RunSpec, time: RunTime, signals: RunSignals, services: FleetServices) {
        self.spec = spec
        self.time = time
        self.signals = signals
        self.services = services
    }

    var clock: any RunClock { time.clock }

    func now() -> Int64 { time.now() }

    func emit(_ event: RunEvent) {
        signals.emit(event)
    }

    /// No new work: a stop was requested or the run is ending.
    var isStopping: Bool { signals.isStopping }

    /// Where a received push went on its way, as its frame says (nothing when the frame says
    /// nothing: a push service that is not pushfleet's); `context`, the frame's trace context.
    func path(of frame: PushFrame, receivedAt: Int64, context: TraceIdentity?) -> DeliveryLedger.PushPath? {
        guard frame.acceptedAt > 0 else { return nil }
        return DeliveryLedger.PushPath(
            hubAt: frame.hubAt.map(time.onRunClock(wall:)), acceptedAt: time.onRunClock(wall: frame.acceptedAt),
            writtenAt: frame.writtenAt.map(time.onRunClock(wall:)), held: frame.stored, delayed: (frame.delay ?? 0) > 0, receivedAt: receivedAt,
            context: context
        )
    }

    /// Sleeps until a monotonic instant, or until a stop request or the task's cancellation,
    /// whichever is first; returns false for the last two. A task group per wait: for the few
    /// waits of faults, reconnects and watchers, not per send, arrival or renewal (``pace(until:_:)``).
    func sleep(until instant: Int64) async -> Bool {
        if isStopping || Task.isCancelled { return false }
        if instant <= now() { return true }
        let stop = signals.stop
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait(until: instant) }
            group.addTask { await stop.reached(.stopping) }
            await group.next()
            group.cancelAll()
        }
        return !isStopping && !Task.isCancelled
    }

    /// Sleeps until a monotonic instant, or until `waits` is interrupted (at a stop request, by
    /// whoever owns it) or the task is cancelled; returns false for the last two. For waits made
    /// once per send, arrival or renewal: no task per wait, and a sender's sends in flight, its
    /// children, are not cancelled by the stop. The wait is on the task's event loop's timer, or
    /// one of the fleet's loops off a loop; a manual clock races the stop instead.
    func pace(until instant: Int64, _ waits: InterruptibleWaits) async -> Bool {
        if isStopping || Task.isCancelled { return false }
        let now = now()
        if instant <= now { return true }
        guard clock is SystemRunClock else { return await sleep(until: instant) }
        let loop = EventLoopExecutor.current ?? services.eventLoops.next()
        return await waits.sleep(for: instant - now, on: loop) && !isStopping
    }

    private func wait(until instant: Int64) async {
        let now = now()
        guard instant > now else { return }
        // A task on an event loop waits on the loop's timer (the run's clock is the system's).
        if clock is SystemRunClock, let loop = EventLoopExecutor.current {
            try? await EventLoopExecutor.sleep(for: instant - now, on: loop)
        } else {
            try? await clock.sleep(until: instant)
        }
    }

    /// Records an HTTP exchange of a closed operation, or its failure; returns the exchange.
    func record(_ result: Result<HTTPExchange, TransportError>, metric: String, operation: String) -> HTTPExchange? {
        switch result {
        case .success(let exchange):
            emit(.operation(metric: metric, nanoseconds: exchange.latency, failed: !exchange.succeeded, at: exchange.end))
            if !exchange.succeeded { emit(.error(.status(operation, exchange.status), at: exchange.end)) }
            return exchange
        case .failure(let error):
            emit(.error(.failed(operation, error.label), at: error.end))
            return nil
        }
    }
}

extension RunContext {
    /// The values a device's requests are filled from.
    func values(for device: VirtualDevice, slots: [APIValue?]) -> RequestValues {
        RequestValues(
            user: device.plan.user, userName: device.userName, password: spec.names.password(device.plan.user), run: spec.runID, users: spec.users,
            device: .init(
                pushToken: backendToken(device.plan, browser: device.browser), platform: spec.api.platformName(device.plan.platform),
                subscription: device.browser?.subscription
            ),
            deviceSlots: slots
        )
    }

    /// The device's push token as the backend is given it.
    func backendToken(_ plan: FleetPlan.Device, browser: VirtualBrowser? = nil) -> String {
        switch spec.api.receive.token(plan.platform) {
        case .channelURL: services.pushServiceURL + "/wns/" + plan.token
        case .subscription: browser?.subscription?.json ?? plan.token
        default: plan.token
        }
    }
}

