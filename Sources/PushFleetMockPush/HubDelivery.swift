import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PushFleetCore
import PushFleetHub
import PushFleetServerSupport

/// The hub's way to the push services: each push goes through the same APNs, FCM v1 and WNS
/// endpoint code a backend's request would, in process, so every check, limit, fault and
/// counter applies, and the hub acts on the same answers a real hub gets.
struct HubDelivery: PushDelivery {
    let service: PushService
    /// The FCM project in the request path (the hub's FCM credential's project).
    let fcmProject: String

    func deliver(_ push: NativePush) async -> DeliveryAnswer {
        if push.platform == .browser { return await deliverToBrowser(push) }
        var fields = HTTPFields()
        for header in push.headers where header.name.lowercased() != "authorization" {
            guard let name = HTTPField.Name(header.name) else { return .failed("invalid header name \(header.name)") }
            fields.append(HTTPField(name: name, value: header.value))
        }
        // The hub's own credentials for every platform, as a real hub holds them.
        fields[.authorization] = "bearer \(service.authority.inProcessBearer)"
        let path: String
        switch push.platform {
        case .apple:
            path = "/3/device/\(push.handle)"
        case .fcmv1, .gcm:
            path = "/v1/projects/\(fcmProject)/messages:send"
        case .windows:
            guard let channel = Self.channel(push.handle) else { return .failed("not a WNS channel URI of this push service") }
            path = "/wns/\(channel)"
        case .browser:
            return .failed("unreachable")
        }
        let head = HTTPRequest(method: .post, scheme: "http", authority: "hub.local", path: path, headerFields: fields)
        let request = Request(head: head, body: .init(buffer: ByteBuffer(string: push.body)))
        let response: Response
        switch push.platform {
        case .apple: response = await APNsEndpoint(service: service).handle(request, token: push.handle, hubAt: push.hubAt)
        case .fcmv1, .gcm: response = await FCMEndpoint(service: service).handle(request, project: fcmProject, hubAt: push.hubAt)
        case .windows: response = await WNSEndpoint(service: service).handle(request, channel: String(path.dropFirst("/wns/".count)), hubAt: push.hubAt)
        case .browser: return .failed("unreachable")
        }
        return Self.answer(response.status.code, platform: push.platform)
    }

    /// A Web Push message to the endpoint, as the hub signed and encrypted it: posted to the
    /// endpoint's path with its host as the authority (the VAPID audience), on a connection as
    /// secure as the endpoint's scheme says.
    private func deliverToBrowser(_ push: NativePush) async -> DeliveryAnswer {
        guard let url = URLComponents(string: push.handle), let scheme = url.scheme, scheme == "http" || scheme == "https", let host = url.host,
            let token = WebPushEndpoint.subscription(url)
        else { return .failed("not a Web Push endpoint of this push service") }
        var fields = HTTPFields()
        for header in push.headers {
            guard let name = HTTPField.Name(header.name) else { return .failed("invalid header name \(header.name)") }
            fields.append(HTTPField(name: name, value: header.value))
        }
        let authority = host + (url.port.map { ":\($0)" } ?? "")
        let path = url.percentEncodedPath + (url.percentEncodedQuery.map { "?" + $0 } ?? "")
        let head = HTTPRequest(method: .post, scheme: scheme, authority: authority, path: path, headerFields: fields)
        let request = Request(head: head, body: .init(buffer: ByteBuffer(bytes: push.payload ?? Data())))
        let response = await ConnectionState.$current.withValue(ConnectionState(isTLS: scheme == "https")) {
            await WebPushEndpoint(service: service).handle(request, token: token, hubAt: push.hubAt)
        }
        return Self.answer(response.status.code, platform: .browser)
    }

    func took(_ note: HubNote) {
        service.watchers.report(note)
    }

    /// What a hub makes of a push service's status: dead handles go, throttling is retried.
    static func answer(_ status: Int, platform: HubPlatform) -> DeliveryAnswer {
        switch (platform, status) {
        case (_, 200...299): .accepted
        case (.apple, 410), (.fcmv1, 404), (.gcm, 404), (.windows, 404), (.windows, 410), (.browser, 404), (.browser, 410): .handleExpired
        case (_, 429), (.windows, 406): .throttled
        default: .failed("status \(status)")
        }
    }

    /// The channel id of a WNS channel URI, in every form a device may hold one: the push
    /// service's `…/wns/{channel}`, WNS's own `https://{host}.notify.windows.com/?token={channel}`
    /// and `…/w/?token={channel}` (the token percent-decoded, as the WNS endpoint reads its
    /// query), or a bare channel id. The host is not checked: a hosts entry may name any.
    static func channel(_ handle: String) -> String? {
        guard handle.contains("/") else { return TokenRules.isValidWNS(handle[...]) ? handle : nil }
        guard let url = URLComponents(string: handle), url.scheme == "http" || url.scheme == "https" else { return nil }
        let parts = url.percentEncodedPath.split(separator: "/")
        if parts.count == 2, parts[0] == "wns", TokenRules.isValidWNS(parts[1]) { return String(parts[1]) }
        guard parts.isEmpty || parts == ["w"], let token = url.queryItems?.first(where: { $0.name == "token" })?.value,
            TokenRules.isValidWNS(token[...])
        else { return nil }
        return token
    }
}
