import Foundation
import NIOCore
import NIOHTTP1
import PushFleetClients
import PushFleetCore
import PushFleetLedger
import PushFleetMetrics
import PushFleetWire
import Synchronization

/// One virtual device. Its life — login, connect, register with the description's rules,
/// renewals, reconnects, departure — is decided by its ``DeviceLifecycle`` machine; this class
/// only carries the machine's actions out (requests, sockets, waits, events) and reports back.
/// Pushes are read and their content fetched here, through the description's receive and fetch
/// steps.
///
/// Per-device state is the machine and a few references; the push channel (own WebSocket, or a
/// share of a multiplexed one) is held elsewhere.
final class VirtualDevice: Sendable {
    let plan: FleetPlan.Device
    let userName: String
    let address: DeviceAddress
    /// The device's own HTTP client when the scenario gives each device its own connection.
    let http: BackendClient?
    /// Its platform's steps, chosen once here.
    let steps: DeviceSteps
    /// A `webpush` device's Push API side (keys, subscription); nil on the other platforms.
    let browser: VirtualBrowser?
    private let machine: Mutex<DeviceLifecycle>
    /// The device's own WebSocket, while it has one.
    private let socket = Mutex<GatewaySocket?>(nil)
    private let retired = Atomic<Bool>(false)
    /// The multiplexed channel the device is subscribed on, while it is.
    private let sharedChannel = Mutex<MuxChannel?>(nil)
    /// A device that acknowledges pushes: the ones it received last (nil otherwise).
    let recentPushes: RecentPushes?

    init(plan: FleetPlan.Device, context: RunContext, http: BackendClient? = nil) {
        self.plan = plan
        self.http = http
        self.userName = context.spec.names.user(plan.user)
        let platform: Platform =
            switch plan.platform {
            case .apns: .apns
            case .fcm: .fcm
            case .wns: .wns
            case .webpush: .webpush
            }
        self.address = DeviceAddress(platform: platform, token: plan.token)
        self.browser = plan.platform == .webpush ? VirtualBrowser(service: context.spec.api.receive.webPush.service(device: plan.index)) : nil
        let steps = context.spec.deviceSteps(plan.platform)
        self.steps = steps
        self.recentPushes = context.spec.scenario.network.keepalive?.acks == true ? RecentPushes() : nil
        self.machine = Mutex(
            DeviceLifecycle(
                settings: steps.lifecycle, probes: plan.probe,
                backoffSeed: context.spec.scenario.seed ^ UInt64(plan.index) &* 0x9E37_79B9_7F4A_7C15
            )
        )
    }

    /// What the device keeps from its registration answers (a registration id), for the other
    /// steps a device makes.
    var keptValues: [APIValue?] { machine.withLock { $0.variables } }

    /// True once the device's own socket is closed for good: departed, failed or the run ended.
    var channelRetired: Bool { retired.load(ordering: .relaxed) }

    /// The device's own HTTP client, or the fleet's pool.
    func client(_ context: RunContext) -> BackendClient { http ?? context.services.backend }

    /// Keeps a new socket and reconnects when the service drops it.
    func adopt(_ new: GatewaySocket, _ context: RunContext) {
        let keep = socket.withLock { current in
            guard !channelRetired else { return false }
            current = new
            return true
        }
        guard keep else {
            new.close()
            return
        }
        new.channel.closeFuture.whenComplete { _ in
            let wasCurrent = self.socket.withLock { current in
                guard current === new else { return false }
                current = nil
                return true
            }
            if wasCurrent && !self.channelRetired && !context.isStopping { context.services.deviceWork.submit(.reconnect(self)) }
        }
    }

    func joined(_ channel: MuxChannel) {
        sharedChannel.withLock { $0 = channel }
    }

    /// Leaves the multiplexed channel (the device failed or departed): the service holds its
    /// pushes from then on, as it does for a device whose own socket closed.
    func leaveSharedChannel() {
        let channel = sharedChannel.withLock { current in
            defer { current = nil }
            return current
        }
        channel?.unsubscribe(self)
    }

    /// Closes the device's own socket for good.
    func retireChannel() {
        let current = socket.withLock { current in
            retired.store(true, ordering: .relaxed)
            defer { current = nil }
            return current
        }
        current?.close()
    }

    // MARK: The machine's actions

    /// The device arrives: sets up until ready or failed (`setup` counts it then). Its setup
    /// time runs from `intended`, its arrival on the schedule, however long it waited to start.
    func arrive(_ context: RunContext, setup: SetupTracker, intended: Int64) async {
        let start = context.now()
        // A page subscribes before it can give its backend anything to register.
        guard await subscribe(context) else {
            context.emit(.deviceFailed(plan.index, at: context.now()))
            setup.finished()
            return
        }
        await drive(machine.withLock { $0.start(now: start) }, context, setup: setup, arrival: (intended, start))
    }

    /// Renews the registration (a periodic round, or a multiplexed channel came back).
    func renewRegistration(_ context: RunContext) async {
        guard !context.isStopping else { return }
        let now = context.now()
        await drive(machine.withLock { $0.renew(now: now) }, context)
    }

    /// The service dropped the device's own socket.
    func reconnect(_ context: RunContext) async {
        let now = context.now()
        await drive(machine.withLock { $0.channelLost(now: now) }, context)
    }

    /// Withdraws the registration (the app is removed).
    func depart(_ context: RunContext) async {
        let now = context.now()
        await drive(machine.withLock { $0.depart(now: now) }, context)
    }

    /// Carries out actions until the machine has none for now. Setup ends at ready or failed;
    /// a run that stops on the way still counts the device as set up.
    private func drive(
        _ first: DeviceLifecycle.Action, _ context: RunContext, setup: SetupTracker? = nil, arrival: (intended: Int64, started: Int64)? = nil
    ) async {
        var setupDone = setup == nil
        defer { if !setupDone { setup?.finished() } }
        var action = first
        var connectStart: Int64?
        while true {
            switch action {
            case .none:
                return
            case .login(let flow):
                let ok = await context.login(user: plan.user, http: client(context))
                let now = context.now()
                action = machine.withLock { $0.loggedIn(ok, for: flow, now: now) }
            case .connect, .connectAt:
                if case .connectAt(let instant) = action {
                    guard await context.sleep(until: instant) else { return }
                }
                if context.isStopping { return }
                connectStart = connectStart ?? context.now()
                let ok = await connect(context)
                let now = context.now()
                if ok, let connectStart {
                    context.emit(.operation(metric: MetricName.connect, nanoseconds: now - connectStart, failed: false, at: now))
                }
                action = machine.withLock { ok ? $0.connected(now: now) : $0.connectFailed(now: now) }
            case .request(let flow, let index):
                action = await request(flow, index, context)
            case .probe:
                await probeTagSpoof(context)
                action = machine.withLock { $0.probed(confirmed: $0.probeConfirmation) }
            case .ready(let confirmed):
                if let confirmed {
                    context.emit(.eligibility(device: plan.index, eligible: true, since: confirmed.start, at: confirmed.end))
                }
                let now = context.now()
                context.emit(.deviceReady(plan.index, at: now))
                if !setupDone {
                    if let arrival {
                        context.emit(.operation(metric: MetricName.setup, nanoseconds: now - arrival.intended, failed: false, at: now))
                        context.emit(.operation(metric: MetricName.setup + ".raw", nanoseconds: now - arrival.started, failed: false, at: now))
                    }
                    setupDone = true
                    setup?.finished()
                }
                return
            case .failed(let step, _):
                if step == .connect && sharedChannel.withLock({ $0 != nil }) { context.emit(.error(.connectTimeout, at: context.now())) }
                context.emit(.deviceFailed(plan.index, at: context.now()))
                retireChannel()
                leaveSharedChannel()
                if !setupDone {
                    setupDone = true
                    setup?.finished()
                }
                return
            case .reregistered(let confirmed, let status):
                context.emit(.error(.renewedAfter(status), at: confirmed.end))
                context.emit(.eligibility(device: plan.index, eligible: true, since: confirmed.start, at: confirmed.end))
                return
            case .reconnectAt(let instant):
                guard await context.sleep(until: instant), !channelRetired else { return }
                let ok = await openChannel(context)
                let now = context.now()
                action = machine.withLock { ok ? $0.reconnected(now: now) : $0.reconnectFailed(now: now) }
            case .departed(let since):
                if let since { context.emit(.eligibility(device: plan.index, eligible: false, since: since, at: context.now())) }
                retireChannel()
                leaveSharedChannel()
                await unsubscribe(context)
                return
            }
        }
    }

    /// Opens the push channel: the device's own socket, or a subscription on its shared channel.
    private func connect(_ context: RunContext) async -> Bool {
        if let channel = sharedChannel.withLock({ $0 }) {
            return await channel.subscribe(self, timeout: context.spec.scenario.timeouts.connect, context: context)
        }
        return await openChannel(context)
    }

    /// One request of a registration flow, reported to the machine.
    private func request(_ flow: DeviceLifecycle.Flow, _ index: Int, _ context: RunContext) async -> DeviceLifecycle.Action {
        let step = flow == .register ? steps.lifecycle.register : steps.lifecycle.unregister
        guard let request = step?.requests[index] else {
            return machine.withLock { $0.failed(flow, reason: .render("no \(flow) step"), now: context.now()) }
        }
        let slots = machine.withLock { $0.variables }
        let outcome = await context.perform(
            request, context.values(for: self, slots: slots), http: client(context), timeout: context.spec.scenario.timeouts.register
        )
        switch outcome {
        case .answered(let status, let extracted, let exchange):
            let (handled, next) = machine.withLock { machine in
                let handled = machine.handles(flow, status: status)
                return (handled, machine.answered(flow, status: status, extracted: extracted, span: .init(start: exchange.start, end: exchange.end)))
            }
            context.record(request, exchange, failed: !handled)
            return next
        case .failed(let reason, let at):
            return machine.withLock { $0.failed(flow, reason: reason, now: at) }
        }
    }

    /// A leak probe's registration: claim another user's tag. Any success is a leak.
    private func probeTagSpoof(_ context: RunContext) async {
        guard let step = steps.lifecycle.probe else { return }
        let victim = context.spec.names.user((plan.user + 1) % context.spec.plan.users)
        guard victim != userName else { return }
        var values = context.values(for: self, slots: keptValues)
        values.victim = victim
        let result = await context.runStep(step, values: values, http: client(context), timeout: context.spec.scenario.timeouts.register, record: false)
        if result.succeeded, let end = result.end {
            context.emit(.probeLeak(.init(device: plan.index, time: end, detail: "backend accepted a registration for \(victim) from \(userName)")))
            context.emit(.error(.probeTagSpoof, at: end))
        }
    }
}
