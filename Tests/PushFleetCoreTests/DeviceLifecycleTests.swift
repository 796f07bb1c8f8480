import PushFleetCore
import PushFleetScenario
import Testing

/// The device lifecycle machine on its own: no sockets, no clock — time is whatever the test
/// says it is in each event.
@Suite("Device lifecycle machine")
struct DeviceLifecycleTests {
    static let api = ScenarioLoader.preset("appbackend")!
    static let tokenAPI = ScenarioLoader.preset("appbackend", auth: .token)!

    static func settings(_ api: APIDescription = api, login: Bool = false, connect: Bool = true, attempts: Int = 3) -> DeviceLifecycle.Settings {
        .init(
            login: login && api.login != nil, connect: connect, register: api.register, unregister: api.unregister, probe: api.probe,
            deviceSlots: api.deviceVariables.count, connectAttempts: attempts, connectTimeout: .seconds(10)
        )
    }

    static func json(_ text: String, _ ref: VariableRef) -> ExtractedValues {
        ExtractedValues(values: [(ref, .text(text))])
    }

    static let idSlot = VariableRef.stored(.device, slot: 0)
    static func span(_ start: Int64, _ end: Int64) -> DeviceLifecycle.Span { .init(start: start, end: end) }

    @Test("connect, create an id, PUT it: ready and eligible from the PUT's start")
    func setup() {
        var device = DeviceLifecycle(settings: Self.settings(), backoffSeed: 1)
        #expect(device.start(now: 0) == .connect)
        #expect(device.connected(now: 10) == .request(.register, index: 0))
        #expect(device.answered(.register, status: 200, extracted: Self.json("r1", Self.idSlot), span: Self.span(10, 20)) == .request(.register, index: 1))
        #expect(device.variables == [.text("r1")])
        #expect(device.answered(.register, status: 200, extracted: .init(), span: Self.span(20, 30)) == .ready(confirmed: Self.span(20, 30)))
        #expect(device.isReady && device.registered)
    }

    @Test("a 410 on the PUT forgets the id and starts over once; a second 410 fails the device")
    func goneOnce() {
        var device = DeviceLifecycle(settings: Self.settings(connect: false), backoffSeed: 1)
        #expect(device.start(now: 0) == .request(.register, index: 0))
        _ = device.answered(.register, status: 200, extracted: Self.json("r1", Self.idSlot), span: Self.span(0, 1))
        #expect(device.handles(.register, status: 410))
        #expect(device.answered(.register, status: 410, extracted: .init(), span: Self.span(1, 2)) == .request(.register, index: 0))
        #expect(device.variables == [nil])
        _ = device.answered(.register, status: 200, extracted: Self.json("r2", Self.idSlot), span: Self.span(2, 3))
        #expect(!device.handles(.register, status: 410))
        #expect(device.answered(.register, status: 410, extracted: .init(), span: Self.span(3, 4)) == .failed(.register, reason: .status(410)))
        #expect(!device.isReady)
    }

    @Test("a renewal reuses the cached id; it changes nothing unless the backend had lost the registration")
    func renewals() {
        var device = DeviceLifecycle(settings: Self.settings(connect: false), backoffSeed: 1)
        _ = device.start(now: 0)
        _ = device.answered(.register, status: 200, extracted: Self.json("r1", Self.idSlot), span: Self.span(0, 1))
        _ = device.answered(.register, status: 200, extracted: .init(), span: Self.span(1, 2))
        // The cached id skips the create request.
        #expect(device.renew(now: 100) == .request(.register, index: 1))
        #expect(device.renew(now: 101) == .none)  // one renewal at a time
        #expect(device.answered(.register, status: 200, extracted: .init(), span: Self.span(100, 110)) == .none)
        #expect(device.renew(now: 200) == .request(.register, index: 1))
        #expect(device.answered(.register, status: 410, extracted: .init(), span: Self.span(200, 201)) == .request(.register, index: 0))
        _ = device.answered(.register, status: 200, extracted: Self.json("r9", Self.idSlot), span: Self.span(201, 202))
        #expect(device.answered(.register, status: 200, extracted: .init(), span: Self.span(202, 203)) == .reregistered(Self.span(202, 203), after: 410))
        #expect(device.variables == [.text("r9")])
        // A renewal that fails leaves the device ready; the next one tries again.
        #expect(device.renew(now: 300) == .request(.register, index: 1))
        #expect(device.failed(.register, reason: .transport("timeout"), now: 301) == .none)
        #expect(device.isReady && device.renew(now: 400) == .request(.register, index: 1))
    }

    @Test("a connect that fails is tried three times 200 ms apart within the timeout, then the device fails")
    func connectAttempts() {
        var device = DeviceLifecycle(settings: Self.settings(), backoffSeed: 1)
        #expect(device.start(now: 0) == .connect)
        #expect(device.connectFailed(now: 5) == .connectAt(200_000_005))
        #expect(device.connectFailed(now: 300_000_000) == .connectAt(500_000_000))
        #expect(device.connectFailed(now: 600_000_000) == .failed(.connect, reason: nil))
        var slow = DeviceLifecycle(settings: Self.settings(), backoffSeed: 1)
        _ = slow.start(now: 0)
        #expect(slow.connectFailed(now: 11_000_000_000) == .failed(.connect, reason: nil))
        var shared = DeviceLifecycle(settings: Self.settings(attempts: 1), backoffSeed: 1)
        _ = shared.start(now: 0)
        #expect(shared.connectFailed(now: 1) == .failed(.connect, reason: nil))
    }

    @Test("token auth: the device logs in first; a 401 logs in again once and repeats the request")
    func relogin() {
        var device = DeviceLifecycle(settings: Self.settings(Self.tokenAPI, login: true, connect: false), backoffSeed: 1)
        #expect(device.start(now: 0) == .login(for: nil))
        #expect(device.loggedIn(true, for: nil, now: 1) == .request(.register, index: 0))
        #expect(device.answered(.register, status: 401, extracted: .init(), span: Self.span(1, 2)) == .login(for: .register))
        #expect(device.loggedIn(true, for: .register, now: 3) == .request(.register, index: 0))
        #expect(device.answered(.register, status: 401, extracted: .init(), span: Self.span(3, 4)) == .failed(.register, reason: .status(401)))
        var refused = DeviceLifecycle(settings: Self.settings(Self.tokenAPI, login: true, connect: false), backoffSeed: 1)
        _ = refused.start(now: 0)
        #expect(refused.loggedIn(false, for: nil, now: 1) == .failed(.login, reason: .login))
    }

    @Test("a dropped channel comes back after a jittered backoff that grows, then renews")
    func reconnects() {
        var device = DeviceLifecycle(settings: Self.settings(connect: false), backoffSeed: 7)
        _ = device.start(now: 0)
        _ = device.answered(.register, status: 200, extracted: Self.json("r1", Self.idSlot), span: Self.span(0, 1))
        _ = device.answered(.register, status: 200, extracted: .init(), span: Self.span(1, 2))
        var reference = Backoff(seed: 7)
        let first = reference.next()
        let second = reference.next()
        #expect(device.channelLost(now: 1000) == .reconnectAt(1000 + first))
        #expect(device.reconnectFailed(now: 2000) == .reconnectAt(2000 + second))
        #expect(device.reconnected(now: 3000) == .request(.register, index: 1))
        // Every drop starts the backoff afresh.
        _ = device.answered(.register, status: 200, extracted: .init(), span: Self.span(3000, 3001))
        #expect(device.channelLost(now: 5000) == .reconnectAt(5000 + first))
    }

    @Test("departure unregisters a registered device and is ineligible from when it asked; twice is nothing")
    func departure() {
        var device = DeviceLifecycle(settings: Self.settings(connect: false), backoffSeed: 1)
        _ = device.start(now: 0)
        _ = device.answered(.register, status: 200, extracted: Self.json("r1", Self.idSlot), span: Self.span(0, 1))
        _ = device.answered(.register, status: 200, extracted: .init(), span: Self.span(1, 2))
        #expect(device.depart(now: 50) == .request(.unregister, index: 0))
        #expect(device.depart(now: 51) == .none)
        #expect(device.renew(now: 52) == .none)
        #expect(device.answered(.unregister, status: 500, extracted: .init(), span: Self.span(50, 60)) == .departed(since: 50))
        #expect(device.channelLost(now: 70) == .none)
        var never = DeviceLifecycle(settings: Self.settings(), backoffSeed: 1)
        _ = never.start(now: 0)
        #expect(never.depart(now: 5) == .departed(since: nil))
        #expect(never.connected(now: 6) == .none)
    }

    @Test("a probing device runs the probe between its confirmation and ready")
    func probe() {
        var device = DeviceLifecycle(settings: Self.settings(connect: false), probes: true, backoffSeed: 1)
        _ = device.start(now: 0)
        _ = device.answered(.register, status: 200, extracted: Self.json("r1", Self.idSlot), span: Self.span(0, 1))
        #expect(device.answered(.register, status: 200, extracted: .init(), span: Self.span(1, 2)) == .probe)
        #expect(device.probed(confirmed: device.probeConfirmation) == .ready(confirmed: Self.span(1, 2)))
    }

    @Test("a confirmation without the value the step needs fails; a lifecycle without register is ready unregistered")
    func missingValues() {
        var device = DeviceLifecycle(settings: Self.settings(connect: false), backoffSeed: 1)
        _ = device.start(now: 0)
        #expect(device.answered(.register, status: 200, extracted: .init(missing: "registration_id"), span: Self.span(0, 1))
            == .failed(.register, reason: .missingValue("registration_id")))
        let bare = DeviceLifecycle.Settings(login: false, connect: true, register: nil, unregister: nil, probe: nil, deviceSlots: 0)
        var unregistered = DeviceLifecycle(settings: bare, backoffSeed: 1)
        _ = unregistered.start(now: 0)
        #expect(unregistered.connected(now: 1) == .ready(confirmed: nil))
        #expect(unregistered.renew(now: 2) == .none)
    }
}
