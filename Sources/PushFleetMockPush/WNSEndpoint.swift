import Foundation
import HTTPTypes
import Hummingbird
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire

/// WNS: `POST /wns/{channel}` — the channel URL a Windows device hands to its backend.
struct WNSEndpoint {
    static let maxPayload = 5000
    static let types: Set<String> = ["wns/toast", "wns/tile", "wns/badge", "wns/raw"]

    let service: PushService

    func register(on router: Router<BasicRequestContext>) {
        router.post("/wns/:channel") { request, context in
            await handle(request, channel: context.parameters.get("channel") ?? "")
        }
    }

    private func reject(_ status: HTTPResponse.Status, _ reason: String) -> Response {
        service.recordRejection("wns:\(status.code)")
        return .empty(status: status, headers: [.wnsErrorDescription: reason])
    }

    func handle(_ request: Request, channel: String) async -> Response {
        var request = request
        let headers = request.headers
        guard let authorization = headers[.authorization], authorization.lowercased().hasPrefix("bearer "),
            authorization.count > 7
        else { return reject(.unauthorized, "missing or malformed access token") }
        guard let type = headers[.wnsType], Self.types.contains(type) else {
            return reject(.badRequest, "X-WNS-Type must be one of \(Self.types.sorted().joined(separator: ", "))")
        }
        guard TokenRules.isValidWNS(channel[...]) else { return reject(.notFound, "invalid channel URI") }
        guard let body = try? await request.collectBody(limit: Self.maxPayload), body.readableBytes <= Self.maxPayload else {
            return reject(.contentTooLarge, "payload exceeds \(Self.maxPayload) bytes")
        }
        guard body.readableBytes > 0 else { return reject(.badRequest, "empty payload") }

        // Raw pushes are not cached for an offline device unless asked; the visual types are.
        let cachePolicy = headers[.wnsCachePolicy]?.lowercased() ?? (type == "wns/raw" ? "no-cache" : "cache")
        var retention: PushService.Retention = cachePolicy == "cache" ? .defaultDuration : .doNotStore
        if cachePolicy == "cache", let ttl = headers[.wnsTTL].flatMap(Int64.init), ttl > 0 {
            retention = .until(Saturating.add(WallClock.nanoseconds(), Saturating.multiply(ttl, 1_000_000_000)))
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
            retention: retention
        )
        switch service.accept(push) {
        case .accepted(_, let online):
            return .empty(headers: [
                .wnsStatus: "received",
                .wnsMessageID: id,
                .wnsDeviceConnectionStatus: online ? "connected" : "disconnected",
            ])
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
