package import Foundation
package import NIOHTTP1
package import PushFleetEmbedded
package import PushFleetHub
import PushFleetMockPush
package import PushFleetWire

/// Requests as Microsoft.Azure.NotificationHubs (the .NET SDK the seeds' backend uses) puts
/// them on the wire: `api-version=2020-06`, a `TrackingId`, and a SAS token over the request
/// URI normalized its way (scheme http, no port, no query, a trailing slash, lower case,
/// `HttpUtility.UrlEncode`d). The Host header names the namespace, as it does when a hosts
/// entry points the namespace at the mock.
package struct DotNetHubWire {
    /// The mock's base URL (`http://127.0.0.1:PORT`).
    package let base: String
    package var settings: NotificationHub.Settings
    package var keyName = NotificationHub.Settings.fullAccessKeyName
    package var key: String?
    /// Seconds the token lives (the SDK's default is 20 minutes); negative for an expired one.
    package var tokenLifetime: Int64 = 1200

    package init(base: String, settings: NotificationHub.Settings) {
        self.base = base
        self.settings = settings
    }

    package var hostHeader: String { settings.namespaceHost }

    package func url(_ path: String, query: String = "") -> String {
        "\(base)/\(settings.hubName)/\(path)?api-version=2020-06\(query)"
    }

    package func token(for path: String) -> String {
        let normalized = "http://\(hostHeader)/\(settings.hubName)/\(path)/"
        let key = key ?? settings.rules.first { $0.keyName == keyName }!.key
        return SharedAccessSignature.token(
            resource: normalized, keyName: keyName, key: key, expiry: Int64(Date().timeIntervalSince1970) + tokenLifetime
        )
    }

    package func request(_ method: HTTPMethod, _ path: String, query: String = "", body: Data? = nil, headers: [(String, String)] = []) async throws -> TestResponse {
        var all = [("Host", hostHeader), ("TrackingId", UUID().uuidString), ("User-Agent", "NHub/2020-06 (api-origin=DotNetSdk;os=Unix;os-version=6.1)")]
        all += headers
        return try await TestHTTP.request(method, url(path, query: query), auth: .raw(token(for: path)), body: body, headers: all)
    }

    // MARK: The seed backend's calls

    /// `CreateRegistrationIdAsync()`: the id is the Location's fourth segment.
    package func createRegistrationID() async throws -> (TestResponse, String?) {
        let response = try await request(.POST, "registrationids")
        guard let location = response.headers.first(name: "Location"), let url = URL(string: location) else { return (response, nil) }
        let segments = url.pathComponents
        // .NET's Uri.Segments: "/", "hub/", "registrationids/", "id".
        guard segments.count == 4, segments[2].lowercased() == "registrationids" else { return (response, nil) }
        return (response, segments[3])
    }

    /// `GetRegistrationsByChannelAsync(handle, 100)`.
    package func registrationsByChannel(_ handle: String) async throws -> TestResponse {
        let filter = SharedAccessSignature.formEncode("ChannelUri eq '\(handle)'")
        return try await request(.GET, "registrations", query: "&$filter=\(filter)&$top=100")
    }

    /// `CreateOrUpdateRegistrationAsync(description)`: the Atom entry the SDK's DataContract
    /// serializer writes, `RegistrationId` nil, no ETag.
    package func createOrUpdate(id: String, element: String, handleElement: String, handle: String, tags: [String]) async throws -> TestResponse {
        var xml = "<entry xmlns=\"http://www.w3.org/2005/Atom\"><content type=\"application/xml\">"
        xml += "<\(element) xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\" xmlns=\"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect\">"
        xml += "<RegistrationId i:nil=\"true\" />"
        if !tags.isEmpty { xml += "<Tags>\(tags.joined(separator: ","))</Tags>" }
        xml += "<\(handleElement)>\(handle)</\(handleElement)></\(element)></content></entry>"
        return try await request(
            .PUT, "registrations/\(id)", body: Data(xml.utf8), headers: [("Content-Type", "application/atom+xml; type=entry; charset=utf-8")]
        )
    }

    /// `DeleteRegistrationAsync(id)` (`If-Match: "*"`) or `DeleteRegistrationAsync(registration)` (its ETag).
    package func deleteRegistration(_ id: String, etag: String = "*") async throws -> TestResponse {
        try await request(.DELETE, "registrations/\(id)", headers: [("If-Match", "\"\(etag)\"")])
    }

    /// `SendNotificationAsync(notification, tags)`: the tags joined with `||`.
    package func send(format: String, body: String, tags: [String], contentType: String = "application/json", headers: [(String, String)] = []) async throws -> TestResponse {
        try await request(
            .POST, "messages", body: Data(body.utf8),
            headers: [("ServiceBusNotification-Format", format), ("ServiceBusNotification-Tags", tags.joined(separator: "||")), ("Content-Type", contentType)] + headers
        )
    }

    /// The `RegistrationId`s and `ETag`s of the entries of an Atom feed or entry.
    package static func entries(_ response: TestResponse) -> [(id: String, etag: String)] {
        let text = response.text
        var found: [(String, String)] = []
        var rest = text[...]
        while let open = rest.range(of: "<RegistrationId>"), let close = rest[open.upperBound...].range(of: "</RegistrationId>") {
            let id = String(rest[open.upperBound..<close.lowerBound])
            let before = text[..<open.lowerBound]
            let etag = before.range(of: "<ETag>", options: .backwards).flatMap { start in
                before[start.upperBound...].range(of: "</ETag>").map { String(before[start.upperBound..<$0.lowerBound]) }
            }
            found.append((id, etag ?? ""))
            rest = rest[close.upperBound...]
        }
        return found
    }
}

extension EmbeddedSystem.Configuration {
    /// The embedded system with a notification hub on its push service.
    package static func withHub(_ settings: NotificationHub.Settings) -> Self {
        var configuration = Self()
        configuration.pushServer.hub = settings
        return configuration
    }
}

extension TestSystem {
    /// The embedded system with a hub, a client that speaks as the .NET SDK does, and devices
    /// online on the gateway (closed afterwards).
    package static func withHub<T: Sendable>(
        _ settings: NotificationHub.Settings,
        devices platforms: [Platform],
        _ body: @escaping @Sendable (TestSystem, DotNetHubWire, [TestDevice]) async throws -> T
    ) async throws -> T {
        try await run(.withHub(settings)) { system in
            var devices: [TestDevice] = []
            defer { devices.forEach { $0.close() } }
            for platform in platforms { devices.append(try await TestDevice.connect(pushService: system.pushService, platform: platform)) }
            return try await body(system, DotNetHubWire(base: system.pushService, settings: settings), devices)
        }
    }
}
