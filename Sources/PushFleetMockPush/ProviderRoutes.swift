import HTTPTypes
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import PushFleetServerSupport

/// The provider requests a backend sends for every push (APNs, FCM HTTP v1, WNS), answered on
/// the event loop that read them (``EventLoopRoutes``) by the same endpoint code the router runs:
/// no task, router or response body per push. Only plain paths are taken here; any other form
/// (percent-escapes, a query, the hub's in-process sends) and Web Push go through the router.
struct ProviderRoutes: EventLoopResponder {
    let service: PushService
    let connections: ConnectionRegistry

    /// Which provider API a route is, as its ``EventLoopRoute/kind``.
    enum Kind: Int {
        case apns, fcm, wns

        var bodyLimit: Int {
            switch self {
            case .apns: APNsEndpoint.maxPayload
            case .fcm: FCMEndpoint.maxRequest
            case .wns: WNSEndpoint.maxPayload
            }
        }
    }

    func route(for head: HTTPRequest) -> EventLoopRoute? {
        guard let (kind, parameter) = Self.route(head) else { return nil }
        return EventLoopRoute(kind: kind.rawValue, parameter: parameter, bodyLimit: kind.bodyLimit)
    }

    func respond(_ route: EventLoopRoute, head: HTTPRequest, body: ByteBuffer?, channel: any Channel) -> CompleteResponse? {
        guard let kind = Kind(rawValue: route.kind) else { return nil }
        let request = ProviderRequest(head: head, body: body, connection: connections.state(for: channel))
        switch kind {
        case .apns: return APNsEndpoint(service: service).respond(request, token: String(route.parameter))
        case .fcm: return FCMEndpoint(service: service).respond(request, project: String(route.parameter))
        case .wns: return WNSEndpoint(service: service).respond(request, channel: String(route.parameter))
        }
    }

    /// The provider API and the path segment it names (device token, project, channel).
    private static func route(_ head: HTTPRequest) -> (Kind, Substring)? {
        guard head.method == .post, let path = head.path else { return nil }
        if let token = segment(of: path, after: "/3/device/") { return (.apns, token) }
        if let channel = segment(of: path, after: "/wns/"), channel != "channels" { return (.wns, channel) }
        if let rest = segment(of: path, after: "/v1/projects/", allowingSlash: true) {
            let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[1] == "messages:send", isPlain(parts[0]) else { return nil }
            return (.fcm, parts[0])
        }
        return nil
    }

    /// What follows `prefix` when it is one plain segment (no slash, query or escape), else nil.
    /// Read on the path's bytes (`withUTF8`, contiguous for every native string): the generic
    /// walks of `hasPrefix`, `dropFirst` and even `utf8.starts(with:)` cost more than the rest of
    /// the route per push.
    private static func segment(of path: String, after prefix: StaticString, allowingSlash: Bool = false) -> Substring? {
        var path = path
        let count = prefix.utf8CodeUnitCount
        let matches = path.withUTF8 { bytes in
            guard bytes.count > count, memcmp(bytes.baseAddress!, prefix.utf8Start, count) == 0 else { return false }
            return bytes[count...].allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "?"), UInt8(ascii: "%"), UInt8(ascii: "#"): false
                case UInt8(ascii: "/"): allowingSlash
                case ...0x20, 0x7F...: allowingSlash
                default: true
                }
            }
        }
        guard matches else { return nil }
        let utf8 = path.utf8
        return Substring(utf8[utf8.index(utf8.startIndex, offsetBy: count)...])
    }

    private static func isPlain(_ segment: Substring) -> Bool {
        !segment.isEmpty && segment.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") }
    }
}
