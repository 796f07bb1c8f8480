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

/// What every device and sender of one run shares.
final class RunContext: Sendable {
    let scenario: Scenario
    let plan: FleetPlan
    let backend: BackendClient
    /// Where the system under test listens, and what the run may do to it.
    let system: SystemUnderTest
    /// Every instant of the run is read from here, and every wait made on it.
    let clock: any RunClock
    /// The run's first instant on `clock`.
    let start: Int64
    /// The run's clock less the wall clock, read once: moves the push service's wall-clock
    /// instants (frames, reports) onto the run's clock.
    let wallOffset: Int64
    let logger: Logger
    let probes = ProbePool()
    /// The backend's API as the scenario describes it.
    let api: APIDescription
    let names: FleetNames
    /// What login gave each user.
    let users: UserValues
    /// Steps whose requests use what login gives.
    let stepsNeedingLogin: Set<APIStepKind>
    /// Each platform's device steps, in `Scenario.PlatformName.allCases` order.
    private let stepsByPlatform: [DeviceSteps]
    private let events: EventPipe
    /// Random per run; in every nonce and device token, so nothing of another run is credited.
    var runID: String { plan.runID }
    private let nextSend = Atomic<Int>(0)
    /// Pushes that arrived and are still being handled (fetching their content).
    let pushesInHand = Atomic<Int>(0)
    /// When the last push arrived.
    let lastPushArrival = Atomic<Int64>(0)
    /// The run's stop: requested, or the run's own end.
    let stop: StopControl
    /// Set once a device was refused at the push service's device cap (marked once per run).
    private let deviceCapMarked = Atomic<Bool>(false)
    let trafficStart = Atomic<Int64>(0)
    /// The push service's host and port, for devices' own sockets.
    let gateway: Origin
    let eventLoops: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    let deviceWork = DeviceWork(loops: MultiThreadedEventLoopGroup.singleton)
    let sourceAddresses: [SocketAddress]
    let trace: (@Sendable (RequestTrace) -> Void)?
    /// What the run's browsers share; nil when the fleet has none.
    let webPush: WebPushShared?
    /// The part of the plan this process plays.
    let shard: Shard
    /// In a shard, its devices' tokens; in shard 0, also every device's (empty otherwise).
    private let ownTokens: Set<String>
    private let planTokens: Set<String>

    init(
        scenario: Scenario,
        plan: FleetPlan,
        system: SystemUnderTest,
        clock: any RunClock,
        start: Int64,
        events: EventPipe,
        logger: Logger,
        sourceAddresses: [SocketAddress] = [],
        trace: (@Sendable (RequestTrace) -> Void)? = nil,
        shard: Shard = .whole,
        stop: StopControl
    ) {
        self.stop = stop
        self.trace = trace
        self.shard = shard
        // Only a shard needs to tell its devices' pushes from the others'; only shard 0 keeps
        // those of tokens of no device, so only it needs every token.
        self.ownTokens = shard.isWhole ? [] : Set(plan.devices.lazy.filter { shard.owns(device: $0.index) }.map(\.token))
        self.planTokens = shard.isWhole || shard.index != 0 ? [] : Set(plan.devices.lazy.map(\.token))
        self.system = system
        self.clock = clock
        self.sourceAddresses = sourceAddresses
        self.scenario = scenario
        self.plan = plan
        self.backend = BackendClient(baseURL: system.backend, connections: scenario.fleet.connections, sourceAddresses: sourceAddresses, clock: clock)
        self.gateway = Origin(system.pushService) ?? Origin("http://127.0.0.1")!
        self.start = start
        self.wallOffset = clock.now() - clock.wallNow()
        self.events = events
        self.logger = logger
        let api = scenario.api ?? APIDescription(name: "none", register: APIStep(kind: .register, requests: []))
        self.api = api
        self.names = scenario.fleet.names
        self.users = UserValues(users: plan.users, slots: api.userVariables.count)
        self.stepsNeedingLogin = Set(
            api.steps.filter { step in
                step.allRequests.contains { request in
                    request.variables.contains { if case .stored(.user, _) = $0 { true } else { false } }
                }
            }.map(\.kind)
        )
        self.stepsByPlatform = DeviceSteps.byPlatform(api, scenario: scenario)
        self.webPush =
            plan.devices.contains { $0.platform == .webpush } ? WebPushShared(pushServiceURL: system.pushService, clock: clock) : nil
    }

    /// The steps a device on `platform` makes, for it to hold.
    func deviceSteps(_ platform: Scenario.PlatformName) -> DeviceSteps {
        stepsByPlatform[Scenario.PlatformName.allCases.firstIndex(of: platform) ?? 0]
    }

    /// The push service's base URL (`http://…`).
    var pushServiceURL: String { system.pushService }

    /// Events handed to the recorder so far (the drain waits until it has applied them all).
    var emitted: Int { events.emitted }

    func emit(_ event: RunEvent) {
        events.emit(event)
    }

    /// A push reached a device; ``pushHandled()`` follows once its handling has emitted its
    /// receipt.
    func pushArrived(at time: Int64) {
        pushesInHand.add(1, ordering: .relaxed)
        lastPushArrival.store(time, ordering: .relaxed)
    }

    func pushHandled() {
        if pushesInHand.subtract(1, ordering: .relaxed).newValue == 0 { events.drainSignal.poke() }
    }

    func now() -> Int64 { clock.now() }

    /// A wall-clock instant of the push service's, on the run's clock (``ForeignInstant``).
    func runTime(fromWall instant: Int64) -> Int64 {
        ForeignInstant.onRunClock(wall: instant, offset: wallOffset, start: start, now: now())
    }

    /// Where a received push went on its way, as its frame says (nothing when the frame says
    /// nothing: a push service that is not pushfleet's).
    func path(of frame: PushFrame, receivedAt: Int64) -> DeliveryLedger.PushPath? {
        guard frame.acceptedAt > 0 else { return nil }
        return DeliveryLedger.PushPath(
            hubAt: frame.hubAt.map(runTime(fromWall:)), acceptedAt: runTime(fromWall: frame.acceptedAt), writtenAt: frame.writtenAt.map(runTime(fromWall:)),
            held: frame.stored, delayed: (frame.delay ?? 0) > 0, receivedAt: receivedAt
        )
    }

    /// Marks the run, once, with the cap the push service refused a device at.
    func markDeviceCap(_ cap: Int) {
        guard !deviceCapMarked.exchange(true, ordering: .relaxed) else { return }
        emit(.marker(ErrorClass.deviceCapMarker(cap), at: now()))
    }

    /// The local address a device's own socket binds to, when the scenario spreads sockets over
    /// several source addresses (past one address's ephemeral ports).
    func sourceAddress(_ device: Int) -> SocketAddress? {
        sourceAddresses.isEmpty ? nil : sourceAddresses[device % sourceAddresses.count]
    }

    func makeSendID() -> Int {
        shard.sendID(nextSend.add(1, ordering: .relaxed).newValue)
    }

    /// What of a push service report this process keeps: in a shard, its own devices' pushes,
    /// and in shard 0 also those of no device and the hub's, so the shards' tapes together
    /// hold every report once.
    func ownPart(of report: PushReport) -> PushReport {
        guard !shard.isWhole else { return report }
        var own = report
        own.hops = report.hops.filter { hop in
            ownTokens.contains(hop.token) || (shard.index == 0 && !planTokens.contains(hop.token))
        }
        if shard.index != 0 { own.hub = nil }
        return own
    }

    /// No new work: a stop was requested or the run is ending.
    var isStopping: Bool { stop.startsNoNewWork }

    /// Sleeps until a monotonic instant, or until a stop request or the task's cancellation,
    /// whichever is first; returns false for the last two. A task group per wait: for waits
    /// counted per device or per round, not per send (``pace(until:)``).
    func sleep(until instant: Int64) async -> Bool {
        if isStopping || Task.isCancelled { return false }
        if instant <= now() { return true }
        let stop = stop
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait(until: instant) }
            group.addTask { await stop.reached(.stopping) }
            await group.next()
            group.cancelAll()
        }
        return !isStopping && !Task.isCancelled
    }

    /// Sleeps until a monotonic instant, or until `waits` is interrupted (the traffic phase does
    /// so at a stop request) or the task is cancelled; returns false for the last two. For the
    /// senders' pacing: on an event loop a wait per send costs no task, and the sends in flight,
    /// which are the sender's children, are not cancelled by the stop.
    func pace(until instant: Int64, _ waits: InterruptibleWaits) async -> Bool {
        if isStopping || Task.isCancelled || waits.isInterrupted { return false }
        let now = now()
        if instant <= now { return true }
        guard clock is SystemRunClock, let loop = EventLoopExecutor.current else { return await sleep(until: instant) }
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
            user: device.plan.user, userName: device.userName, password: names.password(device.plan.user), run: runID, users: users,
            device: .init(
                pushToken: backendToken(device.plan, browser: device.browser), platform: api.platformName(device.plan.platform),
                subscription: device.browser?.subscription
            ),
            deviceSlots: slots
        )
    }

    /// The device's push token as the backend is given it.
    func backendToken(_ plan: FleetPlan.Device, browser: VirtualBrowser? = nil) -> String {
        switch api.receive.token(plan.platform) {
        case .channelURL: pushServiceURL + "/wns/" + plan.token
        case .subscription: browser?.subscription?.json ?? plan.token
        default: plan.token
        }
    }
}

/// Recently seen secure ids and their recipients, for leak probes to try as someone else.
final class ProbePool: Sendable {
    private let entries = Mutex<(items: [(id: String, user: Int)], next: Int)>(([], 0))
    private static let capacity = 1024

    func add(id: String, user: Int) {
        entries.withLock { state in
            if state.items.count < Self.capacity {
                state.items.append((id, user))
            } else {
                state.items[state.next] = (id, user)
                state.next = (state.next + 1) % Self.capacity
            }
        }
    }

    /// A stored id that belongs to someone other than `user`.
    func foreign(to user: Int, pick: UInt64) -> String? {
        entries.withLock { state in
            let others = state.items.filter { $0.user != user }
            return others.isEmpty ? nil : others[Int(pick % UInt64(others.count))].id
        }
    }
}

/// How many local ports one source address has for outgoing connections.
enum EphemeralPorts {
    static func count() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) else { return 28_232 }
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard bounds.count == 2, bounds[1] >= bounds[0] else { return 28_232 }
        return bounds[1] - bounds[0] + 1
    }
}
