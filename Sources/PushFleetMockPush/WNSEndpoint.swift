import Foundation
import HTTPTypes
import Hummingbird
import PushFleetCore
import PushFleetHub
import PushFleetServerSupport
import PushFleetWire

/// WNS: `POST /wns/{channel}`, or a channel URI of WNS's own form (`/w/?token=…`, `/?token=…`),
/// the URL a Windows device hands to its backend. `POST /wns/channels` mints a channel URI for a
/// device, as the device's WNS client does; the URI leads back to the host and port it was asked
/// on, so over TLS with a hosts entry it reads `https://<region>.notify.windows.com/w/?token=…`.
struct WNSEndpoint {
    static let maxPayload = 5000
    static let types: Set<String> = ["wns/toast", "wns/tile", "wns/badge", "wns/raw"]

    let service: PushService

    func register(on router: Router<BasicRequestContext>) {
        router.post("/wns/channels") { request, _ in
            mintChannel(request).response.response
        }
        router.post("/wns/:channel") { request, context in
            await handle(request, channel: context.parameters.get("channel") ?? "")
        }
        // Edge's Web Push endpoints take WNS's own channel URI form; the token says which it is.
        let webPush = WebPushEndpoint(service: service)
        for path in ["/", "/w/"] {
            router.post(RouterPath(stringLiteral: path)) { request, _ in
                let token = request.uri.queryParameters["token"].map(String.init) ?? ""
                if TokenRules.isValidWebPush(token[...]), service.webPushSubscription(token: token) != nil {
                    return await webPush.handle(request, token: token)
                }
                return await handle(request, channel: token)
            }
        }
    }

    private struct Channel: Encodable {
        var channelUri: String
        var token: String
        /// Milliseconds since the epoch; WNS channels live 30 days.
        var expiresAt: Int64
    }

    /// `POST /wns/channels[?token=ID]`: a channel URI for the device `ID` (a new id if none).
    private func mintChannel(_ request: Request) -> ProviderAnswer {
        let given = request.uri.queryParameters["token"].map(String.init)
        let token = given ?? "pf" + String(UInt64.random(in: 1...UInt64.max), radix: 36) + String(UInt64.random(in: 1...UInt64.max), radix: 36)
        guard TokenRules.isValidWNS(token[...]) else { return reject(.badRequest, "invalid channel id") }
        let tls = ConnectionState.current?.isTLS ?? false
        let authority = request.head.authority ?? "localhost"
        let uri = tls ? "https://\(authority)/w/?token=\(token)" : "http://\(authority)/wns/\(token)"
        let expiresAt = Saturating.add(service.now() / 1_000_000, 30 * 86_400_000)
        return .done(.json(Channel(channelUri: uri, token: token, expiresAt: expiresAt)))
    }

    private func reject(_ status: HTTPResponse.Status, _ reason: String) -> ProviderAnswer {
        service.recordRejection("wns:\(status.code)")
        return .refused(.empty(status: status, headers: [.wnsErrorDescription: reason]), status: status.code, reason: reason)
    }

    /// Answers one provider request through the router; `hubAt` when a notification hub in this
    /// process sends it.
    func handle(_ request: Request, channel: String, hubAt: Int64? = nil) async -> Response {
        respond(await ProviderRequest.collecting(request, limit: Self.maxPayload), channel: channel, hubAt: hubAt).response
    }

    /// Answers one provider request whose body was read.
    func respond(_ request: ProviderRequest, channel: String, hubAt: Int64? = nil) -> CompleteResponse {
        let answer = service.answer(request, platform: .wns, token: channel, pushType: request.headers[.wnsType], hubAt: hubAt) {
            decide($0, channel: channel, push: $1, hubAt: hubAt)
        }
        return answer ?? .empty(status: .internalServerError)
    }

    private func decide(_ request: ProviderRequest, channel: String, push number: UInt64, hubAt: Int64?) -> ProviderAnswer {
        let headers = request.headers
        switch service.authority.wnsGrant(authorization: headers[.authorization]) {
        case .valid:
            break
        case .expired:
            service.recordRejection("wns:401")
            let response = CompleteResponse.empty(
                status: .unauthorized,
                headers: [
                    .wwwAuthenticate: "Bearer error=\"invalid_request\",error_description=\"Token has expired\"",
                    .wnsErrorDescription: "Token has expired",
                ]
            )
            return .refused(response, status: 401, reason: "Token has expired")
        case .unknown:
            return reject(.unauthorized, "The cloud service did not present a valid authentication ticket.")
        }
        guard let type = headers[.wnsType], Self.types.contains(type) else {
            return reject(.badRequest, "X-WNS-Type must be one of \(Self.types.sorted().joined(separator: ", "))")
        }
        guard TokenRules.isValidWNS(channel[...]) else { return reject(.notFound, "invalid channel URI") }
        guard let body = request.body, body.readableBytes <= Self.maxPayload else {
            return reject(.contentTooLarge, "payload exceeds \(Self.maxPayload) bytes")
        }
        guard body.readableBytes > 0 else { return reject(.badRequest, "empty payload") }
        // Toast, tile and badge are XML that WNS parses; raw is the app's own bytes.
        if type != "wns/raw", let problem = Self.xmlProblem(body.data) {
            return reject(.badRequest, "the payload is not well-formed XML: \(problem)")
        }

        // Raw pushes are not cached for an offline device unless asked; the visual types are.
        let cachePolicy = headers[.wnsCachePolicy]?.lowercased() ?? (type == "wns/raw" ? "no-cache" : "cache")
        var retention: PushService.Retention = cachePolicy == "cache" ? .defaultDuration : .doNotStore
        if cachePolicy == "cache", let ttl = headers[.wnsTTL].flatMap(Int64.init), ttl > 0 {
            retention = .until(Saturating.add(service.now(), Saturating.multiply(ttl, 1_000_000_000)))
        }
        let data = body.data
        let text = String(validating: data, as: UTF8.self)
        let id = String(UInt64.random(in: 1...UInt64.max), radix: 16, uppercase: true)
        let push = PushService.IncomingPush(
            address: DeviceAddress(platform: .wns, token: channel),
            id: id,
            pushType: type,
            body: text ?? data.base64EncodedString(),
            bodyEncoding: text == nil ? "base64" : nil,
            retention: retention,
            push: number,
            hubAt: hubAt,
            trace: request.traceparent
        )
        switch service.accept(push) {
        case .accepted(_, let online):
            return .done(.empty(headers: [
                .wnsStatus: "received",
                .wnsMessageID: id,
                .wnsDeviceConnectionStatus: online ? "connected" : "disconnected",
            ]))
        case .unregistered:
            return reject(.gone, "channel expired")
        case .throttled:
            // WNS answers throttling with 406 Not Acceptable.
            return reject(.notAcceptable, "throttle limit exceeded")
        }
    }
}

extension HTTPField.Name {
    static let wnsType = Self("X-WNS-Type")!
    static let wnsCachePolicy = Self("X-WNS-Cache-Policy")!
    static let wnsTTL = Self("X-WNS-TTL")!
    static let wnsStatus = Self("X-WNS-Status")!
    static let wnsMessageID = Self("X-WNS-Msg-ID")!
    static let wnsDeviceConnectionStatus = Self("X-WNS-DeviceConnectionStatus")!
    static let wnsErrorDescription = Self("X-WNS-Error-Description")!
}

extension WNSEndpoint {
    /// Nil when a visual payload is one well-formed UTF-8 XML document, as WNS requires; the same
    /// strict checker as the hub's (no DTD, no repair of what libxml2 would recover).
    static func xmlProblem(_ data: Data) -> String? {
        guard String(validating: data, as: UTF8.self) != nil else { return "not UTF-8" }
        do {
            _ = try StrictXML.utf8Document(data)
            return nil
        } catch {
            return error.description
        }
    }
}
