import Foundation
import NIOCore
import NIOHTTP1
import PushFleetClients
import PushFleetCore
import PushFleetMetrics
import Synchronization

/// What browsers of one run share: the push service's subscription API and the backend's
/// applicationServerKey, read once.
final class WebPushShared: Sendable {
    /// Pages subscribe through the push service, not the backend.
    let pushService: BackendClient
    private let key = Mutex<Task<Result<String?, KeyFailure>, Never>?>(nil)

    struct KeyFailure: Error {
        /// A bounded label for errors.csv.
        var label: String
    }

    init(pushServiceURL: String, clock: any RunClock) {
        pushService = BackendClient(baseURL: pushServiceURL, connections: 8, clock: clock)
    }

    /// The key subscriptions are bound to (nil: none), fetched by the first browser to ask; the
    /// others wait for the same answer.
    func applicationServerKey(_ source: WebPushReceive.KeySource, context: RunContext) async -> Result<String?, KeyFailure> {
        let task = key.withLock { current in
            if let current { return current }
            let made = Task { await Self.read(source, context: context) }
            current = made
            return made
        }
        return await task.value
    }

    private static func read(_ source: WebPushReceive.KeySource, context: RunContext) async -> Result<String?, KeyFailure> {
        switch source {
        case .none: return .success(nil)
        case .literal(let key): return .success(key)
        case .fetch(let path, let location):
            let failure: KeyFailure
            switch await context.services.backend.exchange(.GET, path, headers: [], body: nil, timeout: context.spec.scenario.timeouts.register) {
            case .success(let exchange):
                let headers = location.readsHeaders ? exchange.headers.map { ($0.name, $0.value) } : []
                if !exchange.succeeded {
                    failure = KeyFailure(label: "status_\(exchange.status)")
                } else if let key = ValueReader.read(location, headers: headers, body: exchange.body.readableBytesView)?.string,
                    WebPushReceive.isKeyShaped(key)
                {
                    return .success(key)
                } else {
                    failure = KeyFailure(label: "no_key")
                    context.emit(
                        .marker("webpush: GET \(path) (\(exchange.status)) has no VAPID public key at \(location); it held: \(RunContext.excerpt(exchange))", at: exchange.end)
                    )
                }
                context.emit(.error(.failed("webpush.vapid_key", failure.label), at: exchange.end))
            case .failure(let error):
                failure = KeyFailure(label: error.label)
                context.emit(.error(.failed("webpush.vapid_key", error.label), at: error.end))
            }
            return .failure(failure)
        }
    }
}

extension VirtualDevice {
    /// A browser's `pushManager.subscribe()`: the push service mints an endpoint for the
    /// device's subscription id, bound to the backend's key. Done once; true when subscribed.
    func subscribe(_ context: RunContext) async -> Bool {
        guard let browser, browser.subscription == nil else { return true }
        guard let shared = context.services.webPush else { return false }
        let key: String?
        switch await shared.applicationServerKey(context.spec.api.receive.webPush.applicationServerKey, context: context) {
        case .success(let found): key = found
        case .failure(let failure):
            context.emit(.error(.failed(MetricName.webPushSubscribe, "vapid_key_\(failure.label)"), at: context.now()))
            return false
        }
        struct Asked: Encodable {
            var token: String
            var applicationServerKey: String?
            var service: String
            var `public`: Bool?
        }
        let asked = Asked(
            token: plan.token, applicationServerKey: key, service: browser.service.rawValue,
            public: context.spec.api.receive.webPush.endpoints == .public ? true : nil
        )
        let body = (try? JSONEncoder().encode(asked)) ?? Data()
        let result = await shared.pushService.exchange(
            .POST, "/webpush/subscriptions", headers: [("Content-Type", "application/json")], body: ByteBuffer(bytes: body),
            timeout: context.spec.scenario.timeouts.connect
        )
        switch result {
        case .success(let exchange):
            let endpoint = ValueReader.read(.json(Self.endpointPointer), headers: [], body: exchange.body.readableBytesView)?.string
            guard exchange.status == 201, let endpoint else {
                context.emit(.operation(metric: MetricName.webPushSubscribe, nanoseconds: exchange.latency, failed: true, at: exchange.end))
                context.emit(.error(.status(MetricName.webPushSubscribe, exchange.status, answer: exchange.body.readableBytesView), at: exchange.end))
                return false
            }
            browser.subscribed(endpoint: endpoint)
            context.emit(.operation(metric: MetricName.webPushSubscribe, nanoseconds: exchange.latency, failed: false, at: exchange.end))
            return true
        case .failure(let error):
            context.emit(.error(.failed(MetricName.webPushSubscribe, error.label), at: error.end))
            return false
        }
    }

    /// A departing browser's `subscription.unsubscribe()`: its endpoint answers 410 from now on,
    /// so a backend that still pushes to it is told the subscription is gone.
    func unsubscribe(_ context: RunContext) async {
        guard let browser, browser.subscription != nil, let shared = context.services.webPush else { return }
        let result = await shared.pushService.exchange(
            .DELETE, "/webpush/subscriptions/\(plan.token)", headers: [], body: nil, timeout: context.spec.scenario.timeouts.connect
        )
        switch result {
        case .success(let exchange) where exchange.status == 204: break
        case .success(let exchange):
            context.emit(.error(.status(Self.unsubscribeOperation, exchange.status, answer: exchange.body.readableBytesView), at: exchange.end))
        case .failure(let error):
            context.emit(.error(.failed(Self.unsubscribeOperation, error.label), at: error.end))
        }
    }

    static let unsubscribeOperation = "webpush.unsubscribe"

    private static let endpointPointer = try! JSONPointer("/endpoint")
}
