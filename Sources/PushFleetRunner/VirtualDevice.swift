import Foundation
import NIOCore
import NIOHTTP1
import PushFleetCore
import PushFleetWire
import Synchronization

/// One virtual device running the seed's client: login, register (cached id, one retry on 410),
/// hold a push channel, and on each push fetch what it names.
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
    /// The device's own WebSocket, while it has one.
    private let socket = Mutex<GatewaySocket?>(nil)
    private let retired = Atomic<Bool>(false)

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

    /// The seed's `RegisterClient`: reuse the cached id or create one for the handle, then PUT;
    /// on the first 410 drop the cached id and start over once. Marks the device eligible when
    /// the backend confirms.
    func register(_ context: RunContext) async -> Bool {
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
                else { return false }
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
                return false
            }
            if exchange.status == 410 && !retried410 {
                context.emit(.operation(metric: MetricName.registerPut, nanoseconds: exchange.latency, failed: false, at: exchange.end))
                retried410 = true
                registrationID.withLock { $0 = nil }
                continue
            }
            guard context.record(result, metric: MetricName.registerPut, operation: "register.put")?.succeeded == true else { return false }
            context.emit(.eligibility(device: plan.index, eligible: true, since: exchange.start, at: exchange.end))
            return true
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
            context.emit(.probeLeak(at: answer.end))
            context.emit(.error("probe:tag_spoof_accepted", at: answer.end))
        }
    }

    /// Withdraws the registration (the app is removed): ineligible from the moment it asks.
    func depart(_ context: RunContext) async {
        guard !departed.exchange(true, ordering: .relaxed) else { return }
        defer { retireChannel() }
        guard let id = registrationID.withLock({ $0 }) else { return }
        let start = context.now()
        let result = await context.credentials.withAuth(userName, context: context) { auth in
            await (self.http ?? context.backend).exchange(.DELETE, "/api/register/\(id)", authorization: auth, timeout: context.scenario.timeouts.register)
        }
        _ = context.record(result, metric: "http.register.delete", operation: "register.delete")
        context.emit(.eligibility(device: plan.index, eligible: false, since: start, at: context.now()))
    }

    // MARK: Receive

    /// Handles one push as the app would, and reports what it proves to the ledger.
    func receive(_ frame: PushFrame, at receivedAt: Int64, context: RunContext) async {
        let steps = context.scenario.lifecycle
        switch PushContent(frame: frame) {
        case .plain(let nonce):
            context.emit(.receipt(.init(device: plan.index, attribution: nonce.map { .send($0) } ?? .unattributable, time: receivedAt)))
        case .secure(let id):
            guard steps.contains(.fetchSecure) else {
                context.emit(.receipt(.init(device: plan.index, attribution: .unattributable, time: receivedAt)))
                return
            }
            await fetchSecure(id, receivedAt: receivedAt, context: context)
        case .rich(let id, let nonce):
            guard steps.contains(.fetchRich) else {
                context.emit(.receipt(.init(device: plan.index, attribution: nonce.map { .send($0) } ?? .unattributable, time: receivedAt)))
                return
            }
            await fetchRich(id, nonce: nonce, receivedAt: receivedAt, context: context)
        case .unrecognised:
            context.emit(.receipt(.init(device: plan.index, attribution: .unattributable, time: receivedAt)))
        }
    }

    private func fetch(_ id: String, metric: String, operation: String, context: RunContext) async -> HTTPExchange? {
        let path = "/api/notifications/\(id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? id)"
        let result = await context.credentials.withAuth(userName, context: context) { auth in
            await (self.http ?? context.backend).exchange(.GET, path, authorization: auth, timeout: context.scenario.timeouts.fetch)
        }
        if case .success(let exchange) = result, exchange.status == 404 {
            // Not found for this device's user: judged in the ledger, not an error of the run.
            context.emit(.operation(metric: metric, nanoseconds: exchange.latency, failed: true, at: exchange.end))
            return exchange
        }
        return context.record(result, metric: metric, operation: operation)
    }

    private func fetchSecure(_ id: String, receivedAt: Int64, context: RunContext) async {
        guard let exchange = await fetch(id, metric: MetricName.fetchSecure, operation: "fetch_secure", context: context) else { return }
        if exchange.status == 404 {
            context.emit(.receipt(.init(device: plan.index, attribution: .unattributable, time: receivedAt)))
            return
        }
        guard exchange.succeeded else { return }
        guard let note = try? JSONDecoder().decode(SecureNotification.self, from: Data(exchange.body.readableBytesView)),
            let (nonce, recipient) = PushContent.parseSecurePayload(note.payload)
        else {
            context.emit(.receipt(.init(device: plan.index, attribution: .unattributable, time: receivedAt, contentTime: exchange.end)))
            return
        }
        context.emit(
            .receipt(
                .init(device: plan.index, attribution: .send(nonce), time: receivedAt, contentTime: exchange.end, foreignContent: recipient != userName)
            )
        )
        context.probes.add(id: id, user: plan.user)
        if plan.probe { await probeForeignRead(context) }
    }

    private func fetchRich(_ id: String, nonce: Int?, receivedAt: Int64, context: RunContext) async {
        guard let exchange = await fetch(id, metric: MetricName.fetchRich, operation: "fetch_rich", context: context) else { return }
        if exchange.status == 404 {
            context.emit(.receipt(.init(device: plan.index, attribution: .unattributable, time: receivedAt)))
            return
        }
        guard exchange.succeeded else { return }
        // The image a run sends is the bytes `pf:<send>:<recipient>`.
        guard let (fetchedNonce, recipient) = PushContent.parseSecurePayload(exchange.text), fetchedNonce == nonce || nonce == nil else {
            context.emit(.receipt(.init(device: plan.index, attribution: .unattributable, time: receivedAt, contentTime: exchange.end)))
            return
        }
        context.emit(
            .receipt(
                .init(
                    device: plan.index, attribution: .send(fetchedNonce), time: receivedAt, contentTime: exchange.end,
                    foreignContent: recipient != userName
                )
            )
        )
        context.probes.add(id: id, user: plan.user)
    }

    /// A leak probe's read: fetch a notification that belongs to someone else. Only a 404 is right.
    private func probeForeignRead(_ context: RunContext) async {
        guard let id = context.probes.foreign(to: plan.user, pick: stableHash("\(plan.index)-\(context.now())")) else { return }
        let result = await context.credentials.withAuth(userName, context: context) { auth in
            await (self.http ?? context.backend).exchange(.GET, "/api/notifications/\(id)", authorization: auth, timeout: context.scenario.timeouts.fetch)
        }
        if case .success(let exchange) = result, exchange.succeeded {
            context.emit(.probeLeak(at: exchange.end))
            context.emit(.error("probe:foreign_read_succeeded", at: exchange.end))
        }
    }
}
