import Foundation
import HTTPTypes
import Hummingbird
import PushFleetCore
import PushFleetServerSupport
import PushFleetWebPush
import PushFleetWire
import Synchronization

/// Web Push (RFC 8030, with RFC 8291 payloads and RFC 8292 VAPID).
///
/// `POST /webpush/subscriptions` mints a subscription for a browser, as its push service does
/// when a page calls `pushManager.subscribe()`: the endpoint has the form of the service the
/// browser would use (FCM's `/fcm/send/…` or `/wp/…`, Mozilla's `/wpush/v1|v2/…`, Windows'
/// `/w/?token=…`, Apple's `/…`) and leads back to the host and port it was asked on, so over
/// TLS with a hosts entry it reads `https://fcm.googleapis.com/fcm/send/…`. An application
/// server POSTs a message to the endpoint; `DELETE /webpush/subscriptions/{id}` unsubscribes,
/// after which the endpoint answers 410.
struct WebPushEndpoint {
    /// RFC 8030 §7.2: push services must take at least 4,096 bytes; the big ones take no more.
    static let maxPayload = 4096
    /// The longest TTL kept (FCM's: four weeks); a longer one is cut and the answer says so.
    static let maxTTL: Int64 = 2_419_200
    static let urgencies: Set<String> = ["very-low", "low", "normal", "high"]

    let service: PushService

    func register(on router: Router<BasicRequestContext>) {
        router.post("/webpush/subscriptions") { request, _ in
            await mint(request).response.response
        }
        router.delete("/webpush/subscriptions/:token") { _, context in
            unsubscribe(context.parameters.get("token") ?? "")
        }
        for path in ["/fcm/send/:token", "/wp/:token", "/wpush/v1/:token", "/wpush/v2/:token"] {
            router.post(RouterPath(stringLiteral: path)) { request, context in
                await handle(request, token: context.parameters.get("token") ?? "")
            }
        }
        // Apple's form, `web.push.apple.com/{id}`. The parameter shares its name with the hub's
        // `/{hub}/…` routes so that both live on one node of the router; a hub has no POST on
        // its bare name. (Windows' form, `/w/?token=`, is WNS's path: WNSEndpoint hands it over.)
        router.post("/:hub") { request, context in
            await handle(request, token: context.parameters.get("hub") ?? "")
        }
    }

    // MARK: Subscriptions

    /// Which push service's form an endpoint takes.
    enum Service: String, Decodable {
        case fcm, mozilla, windows, apple

        /// The host the real service's endpoints name (Edge's are on a WNS notify host).
        var host: String {
            switch self {
            case .fcm: "fcm.googleapis.com"
            case .mozilla: "updates.push.services.mozilla.com"
            case .windows: "wns2-pf.notify.windows.com"
            case .apple: "web.push.apple.com"
            }
        }
    }

    private struct MintRequest: Decodable {
        var token: String?
        /// The page's VAPID public key (base64url, uncompressed P-256): only messages signed
        /// with it are taken (RFC 8292 §4).
        var applicationServerKey: String?
        var service: Service?
        /// The endpoint on the real service's host over https (`https://fcm.googleapis.com/…`,
        /// with this service's TLS port unless it is 443), as a browser gets it; reached by
        /// hosts entries. Otherwise on the host and port the request was made to.
        var `public`: Bool?
    }

    private struct Subscription: Encodable {
        var endpoint: String
        var token: String
        /// The Push API's `expirationTime`: none.
        var expirationTime: Int64?
    }

    private func mint(_ request: Request) async -> ProviderAnswer {
        var request = request
        guard let body = try? await request.collectBody(limit: 4096) else { return reject(.contentTooLarge, "subscription request over 4096 bytes") }
        let asked: MintRequest
        if body.readableBytes == 0 {
            asked = MintRequest()
        } else {
            guard let decoded = try? JSONDecoder().decode(MintRequest.self, from: body.data) else {
                return reject(.badRequest, "the subscription request is not {token?, applicationServerKey?, service?}")
            }
            asked = decoded
        }
        let token = asked.token ?? Self.newToken()
        guard TokenRules.isValidWebPush(token[...]) else { return reject(.badRequest, "a subscription id is 16 to 512 base64url characters") }
        var key: Data?
        if let text = asked.applicationServerKey {
            guard let decoded = VAPID.publicKey(text) else { return reject(.badRequest, "applicationServerKey is not an uncompressed P-256 public key") }
            key = decoded
        }
        service.subscribeWebPush(token: token, applicationServerKey: key)
        let form = asked.service ?? .fcm
        let endpoint: String
        if asked.public == true {
            let port = service.tlsPort.load(ordering: .relaxed)
            // Https on the service's host reaches nothing without this push service's TLS port.
            guard port != 0 else { return reject(.badRequest, "public endpoints need the push service's TLS listener (serve --pns-tls-listen)") }
            endpoint = Self.endpoint(token: token, service: form, tls: true, authority: form.host + (port == 0 || port == 443 ? "" : ":\(port)"))
        } else {
            endpoint = Self.endpoint(token: token, service: form, tls: ConnectionState.current?.isTLS ?? false, authority: request.head.authority)
        }
        return .done(.json(Subscription(endpoint: endpoint, token: token), status: .created))
    }

    static func newToken() -> String {
        var bytes = Data(count: 32)
        for index in 0..<32 { bytes[index] = UInt8.random(in: 0...255) }
        return Base64URL.encode(bytes)
    }

    static func endpoint(token: String, service: Service, tls: Bool, authority: String?) -> String {
        let base = "\(tls ? "https" : "http")://\(authority ?? "localhost")"
        switch service {
        case .fcm: return "\(base)/fcm/send/\(token)"
        case .mozilla: return "\(base)/wpush/v2/\(token)"
        case .windows: return "\(base)/w/?token=\(token)"
        case .apple: return "\(base)/\(token)"
        }
    }

    /// The subscription id in an endpoint of any form the push service mints.
    static func subscription(_ url: URLComponents) -> String? {
        let parts = url.percentEncodedPath.split(separator: "/").map(String.init)
        let token: String? =
            switch parts.count {
            case 1 where parts[0] == "w": url.queryItems?.first { $0.name == "token" }?.value
            case 1: parts[0]
            case 2 where parts[0] == "wp": parts[1]
            case 3 where parts[0] == "fcm" && parts[1] == "send": parts[2]
            case 3 where parts[0] == "wpush" && (parts[1] == "v1" || parts[1] == "v2"): parts[2]
            default: nil
            }
        guard let token, TokenRules.isValidWebPush(token[...]) else { return nil }
        return token
    }

    private func unsubscribe(_ token: String) -> Response {
        guard TokenRules.isValidWebPush(token[...]), service.unsubscribeWebPush(token: token) else {
            return .empty(status: .notFound)
        }
        return .empty(status: .noContent)
    }

    // MARK: Messages

    /// Answers one message for subscription `token`; `hubAt` when a hub in this process sends it.
    func handle(_ request: Request, token: String, hubAt: Int64? = nil) async -> Response {
        let request = await ProviderRequest.collecting(request, limit: Self.maxPayload)
        let answer = service.answer(request, platform: .webpush, token: token, pushType: "webpush", hubAt: hubAt) {
            decide($0, token: token, push: $1, hubAt: hubAt)
        }
        return (answer ?? .empty(status: .internalServerError)).response
    }

    private func reject(_ status: HTTPResponse.Status, _ reason: String, headers: HTTPFields = [:]) -> ProviderAnswer {
        service.recordRejection("webpush:\(status.code)")
        // FCM's and Mozilla's error bodies: a JSON object with the code and a message.
        struct Problem: Encodable {
            var code: Int
            var errno: Int
            var error: String
            var message: String
        }
        var response = CompleteResponse.json(Problem(code: status.code, errno: status.code, error: status.reasonPhrase, message: reason), status: status)
        for field in headers { response.headers.append(field) }
        return .refused(response, status: status.code, reason: reason)
    }

    private func decide(_ request: ProviderRequest, token: String, push number: UInt64, hubAt: Int64?) -> ProviderAnswer {
        let headers = request.headers
        guard TokenRules.isValidWebPush(token[...]), let subscription = service.webPushSubscription(token: token) else {
            return reject(.notFound, "no such subscription")
        }
        let tls = request.connection?.isTLS ?? false
        let origin = VAPID.origin(scheme: tls ? "https" : "http", authority: request.head.authority)
        let authorization = headers[.authorization]
        if authorization != nil || subscription.applicationServerKey != nil {
            let checked = service.vapid.verify(authorization: authorization, cryptoKey: headers[.webPushCryptoKey], origin: origin, now: service.now() / 1_000_000_000)
            switch checked {
            case .success(let credential):
                if let bound = subscription.applicationServerKey, bound != credential.publicKey {
                    return reject(.forbidden, "the VAPID key is not the subscription's applicationServerKey")
                }
            case .failure(let rejection):
                return reject(.unauthorized, rejection.description, headers: [.wwwAuthenticate: "vapid"])
            }
        }
        guard let ttlText = headers[.webPushTTL] else { return reject(.badRequest, "the TTL header is required") }
        guard let asked = Int64(ttlText.trimmingCharacters(in: .whitespaces)), asked >= 0 else { return reject(.badRequest, "TTL is not a number of seconds") }
        let ttl = min(asked, Self.maxTTL)
        let urgency = headers[.webPushUrgency]?.lowercased()
        if let urgency, !Self.urgencies.contains(urgency) { return reject(.badRequest, "Urgency must be very-low, low, normal or high") }
        let topic = headers[.webPushTopic]
        if let topic, topic.isEmpty || topic.utf8.count > 32 || !topic.utf8.allSatisfy({ Self.isBase64URL($0) }) {
            return reject(.badRequest, "a Topic is 1 to 32 base64url characters")
        }
        guard let body = request.body, body.readableBytes <= Self.maxPayload else {
            return reject(.contentTooLarge, "the payload exceeds \(Self.maxPayload) bytes")
        }
        let encoding = headers[.contentEncoding]?.lowercased()
        var webPush = WebPushHeaders(contentEncoding: nil, urgency: urgency, topic: topic, ttl: ttl)
        if body.readableBytes > 0 {
            switch encoding.flatMap(WebPushContentEncoding.init(rawValue:)) {
            case .aes128gcm:
                // salt, rs, idlen and a 65-byte key, then at least a tag and a delimiter.
                guard body.readableBytes >= 21 + 65 + 17, body.getInteger(at: body.readerIndex + 20, as: UInt8.self) == 65 else {
                    return reject(.badRequest, "the aes128gcm payload has no valid header")
                }
            case .aesgcm:
                guard let encryption = headers[.webPushEncryption], encryption.contains("salt="),
                    let cryptoKey = headers[.webPushCryptoKey], cryptoKey.contains("dh=")
                else {
                    return reject(.badRequest, "aesgcm needs Encryption: salt= and Crypto-Key: dh=")
                }
                webPush.encryption = encryption
                webPush.cryptoKey = cryptoKey
            case nil:
                return reject(.badRequest, "a payload must be encrypted: Content-Encoding aes128gcm or aesgcm")
            }
            webPush.contentEncoding = encoding
        }
        let id = Self.newToken()
        let retention: PushService.Retention =
            ttl == 0 ? .doNotStore : .until(Saturating.add(service.now(), Saturating.multiply(ttl, 1_000_000_000)))
        let incoming = PushService.IncomingPush(
            address: DeviceAddress(platform: .webpush, token: token), id: id, pushType: "webpush", body: body.data.base64EncodedString(),
            bodyEncoding: "base64", retention: retention, push: number, hubAt: hubAt, webPush: webPush,
            trace: request.traceparent
        )
        switch service.accept(incoming) {
        case .accepted:
            let scheme = tls ? "https" : "http"
            return .done(.empty(status: .created, headers: [.location: "\(scheme)://\(request.head.authority ?? "localhost")/m/\(id)", .webPushTTL: String(ttl)]))
        case .unregistered:
            return reject(.gone, "the subscription has expired or was unsubscribed")
        case .throttled:
            return reject(.tooManyRequests, "too many messages for this subscription", headers: [.retryAfter: "1"])
        }
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        (48...57).contains(byte) || (97...122).contains(byte) || (65...90).contains(byte) || byte == 45 || byte == 95
    }
}

extension HTTPField.Name {
    static let webPushTTL = Self("TTL")!
    static let webPushUrgency = Self("Urgency")!
    static let webPushTopic = Self("Topic")!
    static let webPushEncryption = Self("Encryption")!
    static let webPushCryptoKey = Self("Crypto-Key")!
}
