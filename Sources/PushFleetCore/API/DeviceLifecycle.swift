/// One device's life as a state machine: log in, connect its push channel, register (with the
/// description's status rules), become ready; renew its registration after a reconnect and
/// periodically; reconnect with backoff when the push service drops it; depart.
///
/// Pure, in the manner of Hummingbird's `HTTP2ServerConnectionManager.StateMachine`: each event
/// returns the one ``Action`` the engine must carry out, and the engine reports back how it went.
/// Time comes in with the events; nothing here reads a clock, sleeps or touches a socket.
///
/// Domain words: a registration is *confirmed* when the register step's last request answers as
/// expected; from the start of that request the device is an expected recipient (*eligible*).
/// A *renewal* runs the register step again with the device's kept values (a cached
/// registration id); it changes what the ledger expects only when the backend had lost the
/// registration (a rule forgot a value or started the step over).
public struct DeviceLifecycle: Sendable {
    /// What every device of a run shares — of a platform, when the description gives steps per
    /// platform: the steps are already that platform's (``APIStep/on(_:)``).
    public final class Settings: Sendable {
        public let login: Bool
        public let connect: Bool
        public let register: APIStep?
        public let unregister: APIStep?
        /// The leak probe's step, when the description has one.
        public let probe: APIStep?
        public let deviceSlots: Int
        /// Attempts to open the push channel before the device fails, within `connectTimeout`
        /// of the first, `connectPause` apart.
        public let connectAttempts: Int
        public let connectTimeout: Int64
        public let connectPause: Int64
        public let reconnectBase: Duration
        public let reconnectCap: Duration

        public init(
            login: Bool, connect: Bool, register: APIStep?, unregister: APIStep?, probe: APIStep?, deviceSlots: Int,
            connectAttempts: Int = 3, connectTimeout: Duration = .seconds(10), connectPause: Duration = .milliseconds(200),
            reconnectBase: Duration = .milliseconds(200), reconnectCap: Duration = .seconds(10)
        ) {
            self.login = login
            self.connect = connect
            self.register = register
            self.unregister = unregister
            self.probe = probe
            self.deviceSlots = deviceSlots
            self.connectAttempts = connectAttempts
            self.connectTimeout = connectTimeout.nanoseconds
            self.connectPause = connectPause.nanoseconds
            self.reconnectBase = reconnectBase
            self.reconnectCap = reconnectCap
        }
    }

    /// A request's span on the engine's clock: a confirmation makes the device eligible from
    /// `start` (the backend may act on it from then), as recorded at `end`.
    public struct Span: Sendable, Equatable {
        public var start: Int64
        public var end: Int64

        public init(start: Int64, end: Int64) {
            self.start = start
            self.end = end
        }
    }

    public enum Flow: Sendable, Equatable {
        case register, unregister
    }

    public enum Action: Sendable, Equatable {
        case none
        /// Log the device's user in, then report ``loggedIn(_:for:now:)`` with the same flow
        /// (nil: the setup's own login).
        case login(for: Flow?)
        /// Open the push channel now, or at an instant.
        case connect
        case connectAt(Int64)
        /// Make request `index` of a flow's step, then report ``answered(_:status:extracted:span:)``
        /// or ``failed(_:reason:now:)``.
        case request(Flow, index: Int)
        /// Run the leak probe's step (its own flow), then report ``probed(now:)``.
        case probe
        /// Set up: eligible since the confirmation's span, when it registered.
        case ready(confirmed: Span?)
        /// Could not be set up: the step that failed, and why.
        case failed(Scenario.LifecycleStep, reason: StepRun.Failure.Reason?)
        /// A renewal found the registration lost (the status that said so) and made it again:
        /// eligible afresh from the new confirmation.
        case reregistered(Span, after: Int)
        /// Open the push channel again at this instant.
        case reconnectAt(Int64)
        /// Gone: ineligible from `since` (when it asked the backend to forget it), if it was
        /// registered; its channel closes for good.
        case departed(since: Int64?)
    }

    private enum Phase: Sendable, Equatable {
        case idle, loggingIn
        case connecting(attempts: Int, since: Int64)
        case registering, probing, ready, failed, departed
    }

    private indirect enum Boxed<T: Sendable>: Sendable {
        case value(T)
    }

    /// A step in progress; boxed so an idle device does not carry its size.
    private indirect enum Running: Sendable {
        case run(StepRun, since: Int64?)

        var step: StepRun {
            switch self {
            case .run(let run, _): run
            }
        }
    }

    public let settings: Settings
    private var phase: Phase = .idle
    /// The device's kept values (a registration id), by the description's device slots.
    public private(set) var variables: [APIValue?]
    /// Confirmed at least once: from then on there are renewals, and a departure unregisters.
    public private(set) var registered = false
    private var renewing = false
    private var registration: Running?
    private var unregistration: Running?
    /// Boxed, and made only when the channel drops: most devices never need one.
    private var backoff: Boxed<Backoff>?
    private let backoffSeed: UInt64
    /// This device also probes for leaks once it is registered.
    private let probes: Bool

    public init(settings: Settings, probes: Bool = false, backoffSeed: UInt64) {
        self.settings = settings
        self.probes = probes && settings.probe != nil
        self.variables = Array(repeating: nil, count: settings.deviceSlots)
        self.backoffSeed = backoffSeed
    }

    public var isReady: Bool { phase == .ready }
    public var hasDeparted: Bool { phase == .departed }
    public var isRenewing: Bool { renewing }

    // MARK: Setup

    /// The device arrives.
    public mutating func start(now: Int64) -> Action {
        guard phase == .idle else { return .none }
        if settings.login {
            phase = .loggingIn
            return .login(for: nil)
        }
        return afterLogin(now: now)
    }

    /// A login the machine asked for is over.
    public mutating func loggedIn(_ succeeded: Bool, for flow: Flow?, now: Int64) -> Action {
        switch flow {
        case nil:
            guard phase == .loggingIn else { return .none }
            guard succeeded else {
                phase = .failed
                return .failed(.login, reason: .login)
            }
            return afterLogin(now: now)
        case .register?:
            guard let running = registration else { return .none }
            return drive(.register, running.step.loggedIn(succeeded), now: now)
        case .unregister?:
            guard let running = unregistration else { return .none }
            return drive(.unregister, running.step.loggedIn(succeeded), now: now)
        }
    }

    private mutating func afterLogin(now: Int64) -> Action {
        if settings.connect {
            phase = .connecting(attempts: 0, since: now)
            return .connect
        }
        return startRegistration(now: now)
    }

    /// The push channel is open (the push service confirmed the device online).
    public mutating func connected(now: Int64) -> Action {
        guard case .connecting = phase else { return .none }
        return startRegistration(now: now)
    }

    /// An attempt to open the push channel failed.
    public mutating func connectFailed(now: Int64) -> Action {
        guard case .connecting(let attempts, let since) = phase else { return .none }
        let made = attempts + 1
        if made >= settings.connectAttempts || now - since > settings.connectTimeout {
            phase = .failed
            return .failed(.connect, reason: nil)
        }
        phase = .connecting(attempts: made, since: since)
        return .connectAt(now + settings.connectPause)
    }

    private mutating func startRegistration(now: Int64) -> Action {
        guard let step = settings.register else {
            phase = .ready
            return .ready(confirmed: nil)
        }
        phase = .registering
        var run = step.makeRun()
        let action = run.start(device: variables)
        registration = .run(run, since: nil)
        return drive(.register, action, now: now)
    }

    /// The leak probe is done; the device is ready.
    public mutating func probed(confirmed: Span?) -> Action {
        guard phase == .probing else { return .none }
        phase = .ready
        return .ready(confirmed: confirmed)
    }

    // MARK: Requests

    /// An answer to a flow's current request.
    public mutating func answered(_ flow: Flow, status: Int, extracted: ExtractedValues, span: Span) -> Action {
        switch flow {
        case .register:
            guard case .run(var run, _) = registration else { return .none }
            let action = run.answered(status: status, extracted: extracted, device: &variables)
            registration = .run(run, since: nil)
            return drive(.register, action, now: span.end, span: span)
        case .unregister:
            guard case .run(var run, let since) = unregistration else { return .none }
            let action = run.answered(status: status, extracted: extracted, device: &variables)
            unregistration = .run(run, since: since)
            return drive(.unregister, action, now: span.end, span: span)
        }
    }

    /// Whether a flow's current request answering this status goes on (expected, or a rule
    /// handles it) rather than failing: the engine counts the others as failed requests.
    public func handles(_ flow: Flow, status: Int) -> Bool {
        (flow == .register ? registration : unregistration)?.step.handles(status: status) ?? false
    }

    /// A flow's current request got no answer, or could not be made.
    public mutating func failed(_ flow: Flow, reason: StepRun.Failure.Reason, now: Int64) -> Action {
        let running = flow == .register ? registration : unregistration
        guard let running else { return .none }
        return drive(flow, running.step.failed(reason), now: now)
    }

    /// Carries a step's action out to the engine, or finishes the flow.
    private mutating func drive(_ flow: Flow, _ action: StepRun.Action, now: Int64, span: Span? = nil) -> Action {
        switch action {
        case .perform(let index): return .request(flow, index: index)
        case .login: return .login(for: flow)
        case .done(let outcome):
            return flow == .register ? registrationDone(outcome, span: span) : unregistrationDone(now: now)
        case .failed(let failure):
            return flow == .register ? registrationFailed(failure) : unregistrationDone(now: now)
        }
    }

    private mutating func registrationDone(_ outcome: StepRun.Outcome, span: Span?) -> Action {
        registration = nil
        let confirmed = span
        registered = true
        if renewing {
            renewing = false
            guard phase == .ready, let status = outcome.recoveredFrom, let confirmed else { return .none }
            return .reregistered(confirmed, after: status)
        }
        guard phase == .registering else { return .none }
        if probes {
            phase = .probing
            probeConfirmation = confirmed
            return .probe
        }
        phase = .ready
        return .ready(confirmed: confirmed)
    }

    /// The confirmation a setup with a probe holds until the probe is done.
    public private(set) var probeConfirmation: Span?

    private mutating func registrationFailed(_ failure: StepRun.Failure) -> Action {
        registration = nil
        if renewing {
            // The registration may still stand; the next renewal tries again.
            renewing = false
            return .none
        }
        guard phase == .registering else { return .none }
        phase = .failed
        return .failed(.register, reason: failure.reason)
    }

    private mutating func unregistrationDone(now: Int64) -> Action {
        guard case .run(_, let since) = unregistration else { return .none }
        unregistration = nil
        return .departed(since: since)
    }

    // MARK: Renewals, reconnects, departure

    /// Time to renew (a periodic round, or the push channel came back).
    public mutating func renew(now: Int64) -> Action {
        guard phase == .ready, registered, !renewing, let step = settings.register else { return .none }
        renewing = true
        var run = step.makeRun()
        let action = run.start(device: variables)
        registration = .run(run, since: nil)
        return drive(.register, action, now: now)
    }

    /// The push service dropped the device's own channel.
    public mutating func channelLost(now: Int64) -> Action {
        guard phase != .departed, phase != .failed else { return .none }
        var fresh = Backoff(base: settings.reconnectBase, cap: settings.reconnectCap, seed: backoffSeed)
        let wait = fresh.next()
        backoff = .value(fresh)
        return .reconnectAt(now + wait)
    }

    /// Another attempt to reopen the channel failed.
    public mutating func reconnectFailed(now: Int64) -> Action {
        guard phase != .departed, phase != .failed, case .value(var current) = backoff else { return .none }
        let wait = current.next()
        backoff = .value(current)
        return .reconnectAt(now + wait)
    }

    /// The channel is back: the backend may have lost the registration meanwhile.
    public mutating func reconnected(now: Int64) -> Action {
        renew(now: now)
    }

    /// The app is removed: unregister if registered, then the channel closes for good.
    public mutating func depart(now: Int64) -> Action {
        guard phase != .departed else { return .none }
        phase = .departed
        renewing = false
        registration = nil
        guard registered, let step = settings.unregister else { return .departed(since: nil) }
        var run = step.makeRun()
        let action = run.start(device: variables)
        unregistration = .run(run, since: now)
        return drive(.unregister, action, now: now)
    }
}
