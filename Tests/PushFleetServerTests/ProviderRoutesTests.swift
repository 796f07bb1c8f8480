import HTTPTypes
@testable import PushFleetMockPush
import PushFleetServerSupport
import Testing

/// Which provider requests are answered at the loop: only plain paths, matched as bytes.
@Suite("Provider routes")
struct ProviderRoutesTests {
    static func head(_ method: HTTPRequest.Method, _ path: String) -> HTTPRequest {
        HTTPRequest(method: method, scheme: "http", authority: "127.0.0.1", path: path)
    }

    @Test("APNs, FCM and WNS plain paths are taken with their parameter; escapes, queries, slashes, non-ASCII, marks on the prefix and other methods are the router's")
    func hostilePaths() {
        let routes = ProviderRoutes(service: PushService(), connections: ConnectionRegistry())
        let token = String(repeating: "ab", count: 32)
        #expect(routes.route(for: Self.head(.post, "/3/device/\(token)"))?.parameter == token[...])
        #expect(routes.route(for: Self.head(.post, "/3/device/\(token)"))?.kind == ProviderRoutes.Kind.apns.rawValue)
        #expect(routes.route(for: Self.head(.post, "/v1/projects/p-1/messages:send"))?.parameter == "p-1")
        #expect(routes.route(for: Self.head(.post, "/wns/chan_1"))?.parameter == "chan_1")
        for path in [
            "/3/device/", "/3/device", "/3/device/a/b", "/3/device/a?b=1", "/3/device/%41", "/3/device/a#b", "/3/device/a b",
            "/3/device/\u{7F}", "/3/device/é", "/3/device\u{301}/ab", "/3/device/\u{301}ab", "/3/DEVICE/ab", "//3/device/ab",
            "/wns/channels", "/wns/", "/wns/a/b", "/v1/projects/p/messages:send/x", "/v1/projects//messages:send",
            "/v1/projects/p%2F/messages:send", "/v1/projects/p/messages:sendx", "/v1/projects/p", "/v1/projects/é/messages:send",
            "/3/device/" + String(repeating: "\u{1}", count: 3),
        ] {
            #expect(routes.route(for: Self.head(.post, path)) == nil, "\(path)")
        }
        #expect(routes.route(for: Self.head(.get, "/3/device/\(token)")) == nil)
        #expect(routes.route(for: Self.head(.put, "/wns/chan_1")) == nil)
    }
}
