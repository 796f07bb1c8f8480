import Foundation
import NIOCore
import NIOHTTP1
import PushFleetCore
import PushFleetWire
import Synchronization
import PushFleetClients
import PushFleetMetrics

/// One virtual device running the seed's client: login, register (cached id, one retry on 410),
/// hold a push channel, renew the registration after reconnecting (and periodically when the
/// scenario says), and on each push fetch what it names.
///
/// Per-device state is a few hundred bytes; the push channel (own WebSocket, or a share of a
/// multiplexed one) is held elsewhere.
final class VirtualDevice: Sendable {
    let plan: FleetPlan.Device
    let userName: String
    let address: DeviceAddress
    /// The device's own HTTP client when the scenario gives each device its own connection.
    let http: BackendClient?
    private let registrationID = Mutex<String?>(nil)
    private let departed = Atomic<Bool>(false)
    /// Set once the first registration is confirmed; only then are there renewals.
    private let registered = Atomic<Bool>(false)
    private let renewing = Atomic<Bool>(false)
    /// The device's own WebSocket, while it has one.
    private let socket = Mutex<GatewaySocket?>(nil)
    private let retired = Atomic<Bool>(false)
    /// The multiplexed channel the device is subscribed on, while it is.
    private let sharedChannel = Mutex<MuxChannel?>(nil)

    init(plan: FleetPlan.Device, names: FleetNames, http: BackendClient? = nil) {
        self.plan = plan
        self.http = http
        self.userName = names.user(plan.user)
        let platform: Platform =
            switch plan.platform {
            case .apns: .apns
            case .fcm: .fcm
            case .wns: .wns
            }
        self.address = DeviceAddress(platform: platform, token: plan.token)
    }

    var hasDeparted: Bool { departed.load(ordering: .relaxed) }

    /// True once the device's own socket is closed for good: departed, failed or the run ended.
    var channelRetired: Bool { retired.load(ordering: .relaxed) }

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
            if wasCurrent && !self.channelRetired && !context.isStopping { context.deviceWork.submit(.reconnect(self)) }
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

    /// The login step: with token auth, `POST /api/login`; with Basic, nothing to do. A failed
    /// login fails the device.
    func logIn(_ context: RunContext) async -> Bool {
        guard context.scenario.lifecycle.contains(.login) else { return true }
        guard await context.credentials.login(userName, context: context) else {
            context.emit(.deviceFailed(plan.index, at: context.now()))
            return false
        }
        return true
    }

    // MARK: Register

    /// The seed's `RegisterClient` at first launch: create an id for the handle, then PUT.
    /// Marks the device eligible when the backend confirms.
    func register(_ context: RunContext) async -> Bool {
        guard case .confirmed(let exchange, _) = await registerSteps(context) else { return false }
        registered.store(true, ordering: .relaxed)
        context.emit(.eligibility(device: plan.index, eligible: true, since: exchange.start, at: exchange.end))
        return true
    }

    /// Renews the registration as an app does at each launch: PUT of the cached id, and when the
    /// backend has lost it (410), a new one. Only a new registration changes what the ledger
    /// expects: a renewal the backend confirms leaves the device as it was.
    func renewRegistration(_ context: RunContext) async {
        guard registered.load(ordering: .relaxed), !hasDeparted, !context.isStopping,
            context.scenario.lifecycle.contains(.register), !renewing.exchange(true, ordering: .relaxed)
        else { return }
        defer { renewing.store(false, ordering: .relaxed) }
        guard case .confirmed(let exchange, let renewed) = await registerSteps(context), renewed, !hasDeparted else { return }
        context.emit(.error("register:renewed_after_410", at: exchange.end))
        context.emit(.eligibility(device: plan.index, eligible: true, since: exchange.start, at: exchange.end))
    }

    enum RegisterOutcome {
        case failed
        /// The PUT's exchange, and whether the cached id was gone and a new one was made.
        case confirmed(HTTPExchange, renewed: Bool)
    }

    /// Reuse the cached id or create one for the handle, then PUT; on the first 410 drop the
    /// cached id and start over once.
    private func registerSteps(_ context: RunContext) async -> RegisterOutcome {
        var retried410 = false
        let body = try! JSONEncoder().encode(DeviceRegistration(platform: plan.platform.rawValue, handle: plan.token, tags: []))
        while true {
            let cached = registrationID.withLock { $0 }
            let id: String
            if let cached {
                id = cached
            } else {
                let result = await context.credentials.withAuth(userName, context: context) { auth in
                    await (self.http ?? context.backend).exchange(
                        .POST, "/api/register?handle=\(self.plan.token)", authorization: auth, timeout: context.scenario.timeouts.register
                    )
                }
                guard let exchange = context.record(result, metric: MetricName.registerPost, operation: "register.post"),
                    exchange.succeeded, let created = try? JSONDecoder().decode(String.self, from: Data(exchange.body.readableBytesView))
                else { return .failed }
                id = created
                registrationID.withLock { $0 = created }
            }
            let result = await context.credentials.withAuth(userName, context: context) { auth in
                await (self.http ?? context.backend).exchange(
                    .PUT, "/api/register/\(id)", authorization: auth, body: body, timeout: context.scenario.timeouts.register
                )
            }
            guard case .success(let exchange) = result else {
                _ = context.record(result, metric: MetricName.registerPut, operation: "register.put")
                return .failed
            }
            if exchange.status == 410 && !retried410 {
                context.emit(.operation(metric: MetricName.registerPut, nanoseconds: exchange.latency, failed: false, at: exchange.end))
                retried410 = true
                registrationID.withLock { $0 = nil }
                continue
            }
            guard context.record(result, metric: MetricName.registerPut, operation: "register.put")?.succeeded == true else { return .failed }
            return .confirmed(exchange, renewed: retried410)
        }
    }

    /// A leak probe's registration: claim another user's tag. Any success is a leak.
    func probeTagSpoof(_ context: RunContext) async {
        let victim = context.scenario.fleet.names.user((plan.user + 1) % context.plan.users)
        guard victim != userName else { return }
        let created = await context.credentials.withAuth(userName, context: context) { auth in
            await (self.http ?? context.backend).exchange(.POST, "/api/register", authorization: auth, timeout: context.scenario.timeouts.register)
        }
        guard case .success(let exchange) = created, exchange.succeeded,
            let id = try? JSONDecoder().decode(String.self, from: Data(exchange.body.readableBytesView))
        else { return }
        let body = try! JSONEncoder().encode(
            DeviceRegistration(platform: plan.platform.rawValue, handle: "probe-\(plan.token)", tags: ["username:\(victim)"])
        )
        let spoof = await context.credentials.withAuth(userName, context: context) { auth in
            await (self.http ?? context.backend).exchange(.PUT, "/api/register/\(id)", authorization: auth, body: body, timeout: context.scenario.timeouts.register)
        }
        if case .success(let answer) = spoof, answer.succeeded {
            context.emit(.probeLeak(.init(device: plan.index, time: answer.end, detail: "backend accepted tag username:\(victim) from \(userName)")))
            context.emit(.error("probe:tag_spoof_accepted", at: answer.end))
        }
    }

    /// Withdraws the registration (the app is removed): ineligible from the moment it asks.
    func depart(_ context: RunContext) async {
        guard !departed.exchange(true, ordering: .relaxed) else { return }
        defer {
            retireChannel()
            leaveSharedChannel()
        }
        guard let id = registrationID.withLock({ $0 }) else { return }
        let start = context.now()
        let result = await context.credentials.withAuth(userName, context: context) { auth in
            await (self.http ?? context.backend).exchange(.DELETE, "/api/register/\(id)", authorization: auth, timeout: context.scenario.timeouts.register)
        }
        _ = context.record(result, metric: "http.register.delete", operation: "register.delete")
        context.emit(.eligibility(device: plan.index, eligible: false, since: start, at: context.now()))
    }

    // MARK: Receive

    /// Handles one push as the app would, and reports what it proves to the ledger. A push the
    /// service refused for this device's token is recorded as such, never as a delivery.
    func receive(_ frame: PushFrame, at receivedAt: Int64, context: RunContext) async {
        defer { context.pushHandled() }
        let content = PushContent(frame: frame, run: context.runID)
        if frame.type == PushFrame.refusedType {
            context.emit(.rejection(.init(device: plan.index, refused: Self.attribution(of: content), at: receivedAt)))
            return
        }
        let steps = context.scenario.lifecycle
        switch content {
        case .plain, .unrecognised:
            emitReceipt(Self.attribution(of: content), at: receivedAt, context: context)
        case .secure(let id):
            guard steps.contains(.fetchSecure) else {
                emitReceipt(.content(id), at: receivedAt, context: context)
                return
            }
            await fetchSecure(id, receivedAt: receivedAt, context: context)
        case .rich(let id, let nonce):
            guard steps.contains(.fetchRich) else {
                emitReceipt(nonce?.attribution ?? .content(id), at: receivedAt, context: context)
                return
            }
            await fetchRich(id, nonce: nonce, receivedAt: receivedAt, context: context)
        }
    }

    /// What a push names before any fetch.
    static func attribution(of content: PushContent) -> DeliveryLedger.Attribution {
        switch content {
        case .plain(let nonce): nonce?.attribution ?? .unattributable
        case .secure(let id): .content(id)
        case .rich(let id, let nonce): nonce?.attribution ?? .content(id)
        case .unrecognised: .unattributable
        }
    }

    private func emitReceipt(
        _ attribution: DeliveryLedger.Attribution, at receivedAt: Int64, content: DeliveryLedger.ContentCheck = .none, contentID: String? = nil,
        context: RunContext
    ) {
        context.emit(.receipt(.init(device: plan.index, attribution: attribution, time: receivedAt, content: content, contentID: contentID)))
    }

    /// Fetches stored content; the exchange when it answered 2xx, else why not (a bounded label).
    private func fetch(_ id: String, metric: String, operation: String, context: RunContext) async -> Result<HTTPExchange, FetchFailure> {
        let path = "/api/notifications/\(id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? id)"
        let result = await context.credentials.withAuth(userName, context: context) { auth in
            await (self.http ?? context.backend).exchange(.GET, path, authorization: auth, timeout: context.scenario.timeouts.fetch)
        }
        switch result {
        case .success(let exchange) where exchange.succeeded:
            _ = context.record(result, metric: metric, operation: operation)
            return .success(exchange)
        case .success(let exchange):
            // Refused: judged in the ledger (unverified or misdelivered), not an error of the run.
            context.emit(.operation(metric: metric, nanoseconds: exchange.latency, failed: true, at: exchange.end))
            return .failure(FetchFailure(reason: "status_\(exchange.status)"))
        case .failure(let error):
            _ = context.record(result, metric: metric, operation: operation)
            return .failure(FetchFailure(reason: error.label))
        }
    }

    struct FetchFailure: Error {
        var reason: String
    }

    private func fetchSecure(_ id: String, receivedAt: Int64, context: RunContext) async {
        let exchange: HTTPExchange
        switch await fetch(id, metric: MetricName.fetchSecure, operation: "fetch_secure", context: context) {
        case .success(let answer): exchange = answer
        case .failure(let failure):
            emitReceipt(.content(id), at: receivedAt, content: .failed(reason: failure.reason), contentID: id, context: context)
            return
        }
        let fetched = DeliveryLedger.ContentCheck.fetched(at: exchange.end)
        guard let note = try? JSONDecoder().decode(SecureNotification.self, from: Data(exchange.body.readableBytesView)),
            let (nonce, recipient) = PushContent.parseSecurePayload(note.payload, run: context.runID)
        else {
            // Content that is no send's: not what was sent to anyone.
            emitReceipt(.unattributable, at: receivedAt, content: fetched, context: context)
            return
        }
        emitReceipt(nonce.attribution, at: receivedAt, content: fetched, contentID: id, context: context)
        if case .this = nonce { poolForProbes(id, recipient: recipient, context: context) }
        if plan.probe { await probeForeignRead(context) }
    }

    /// Judges a rich push by the id it names and the recipient the content is served to; with
    /// `rich_content: echo`, also by the bytes, which then must name the send and recipient.
    private func fetchRich(_ id: String, nonce: Nonce?, receivedAt: Int64, context: RunContext) async {
        let exchange: HTTPExchange
        switch await fetch(id, metric: MetricName.fetchRich, operation: "fetch_rich", context: context) {
        case .success(let answer): exchange = answer
        case .failure(let failure):
            emitReceipt(nonce?.attribution ?? .content(id), at: receivedAt, content: .failed(reason: failure.reason), contentID: id, context: context)
            return
        }
        let fetched = DeliveryLedger.ContentCheck.fetched(at: exchange.end)
        guard context.scenario.richContent == .echo else {
            emitReceipt(nonce?.attribution ?? .content(id), at: receivedAt, content: fetched, contentID: id, context: context)
            return
        }
        // The image a run sends is the bytes `pf:<run>:<send>:<recipient>`.
        guard let (echoed, recipient) = PushContent.parseSecurePayload(exchange.text, run: context.runID), nonce == nil || echoed == nonce
        else {
            emitReceipt(.unattributable, at: receivedAt, content: fetched, context: context)
            return
        }
        emitReceipt(echoed.attribution, at: receivedAt, content: fetched, contentID: id, context: context)
        if case .this = echoed { poolForProbes(id, recipient: recipient, context: context) }
    }

    /// Offers a fetched id to the leak probes under its recipient (who may not be this device's
    /// user: a misdelivered push's content names its true owner, whose own read is no leak).
    private func poolForProbes(_ id: String, recipient: String, context: RunContext) {
        guard context.scenario.leakProbeShare > 0 else { return }
        let owner = recipient == userName ? plan.user : context.scenario.fleet.names.userIndex(recipient, users: context.plan.users)
        if let owner { context.probes.add(id: id, user: owner) }
    }

    /// A leak probe's read: fetch a notification that belongs to someone else. Only a 404 is right.
    private func probeForeignRead(_ context: RunContext) async {
        guard let id = context.probes.foreign(to: plan.user, pick: stableHash("\(plan.index)-\(context.now())")) else { return }
        let result = await context.credentials.withAuth(userName, context: context) { auth in
            await (self.http ?? context.backend).exchange(
                .GET, "/api/notifications/\(id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? id)", authorization: auth,
                timeout: context.scenario.timeouts.fetch
            )
        }
        if case .success(let exchange) = result, exchange.succeeded {
            context.emit(.probeLeak(.init(device: plan.index, time: exchange.end, detail: "probe read another user's notification \(id)")))
            context.emit(.error("probe:foreign_read_succeeded", at: exchange.end))
        }
    }
}
