import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PushFleetCore
import PushFleetHub
import PushFleetWebPush
import PushFleetWire
import Synchronization

/// The backend's way through a notification hub, as the seeds' AppBackend goes: registrations
/// are kept in the hub (created or updated at the backend's own ids, deleted with it, and on a
/// new id for a handle every other registration of that handle goes), and a send is one hub
/// send per platform to the recipient's tag, which the hub fans out.
///
/// The backend's store stays the authority for who owns an id and when it expires (401/403/410
/// stay the backend's answers); the hub holds what is sent to.
struct HubSender: Sendable {
    let client: HTTPClient
    let connection: HubConnectionString
    let hubName: String
    /// Where the hub is; for the embedded hub it is known only once the push service listens.
    let baseURL: @Sendable () async throws -> String
    let requestTimeout: Duration
    let maxAttempts: Int

    static let apiVersion = "2020-06"
    /// Tokens live 20 minutes and are reused for 18, as the .NET SDK does: signing per request
    /// would cost an HMAC each time.
    let tokens = TokenCache()

    final class TokenCache: Sendable {
        private let entries = Mutex<[String: (token: String, renewAt: Int64)]>([:])

        func token(for resource: String, connection: HubConnectionString, now: Int64) -> String {
            if let cached = entries.withLock({ $0[resource] }), cached.renewAt > now { return cached.token }
            let token = SharedAccessSignature.token(resource: resource, keyName: connection.keyName, key: connection.key, expiry: now + 1200)
            entries.withLock {
                if $0.count >= 1024 { $0.removeAll() }
                $0[resource] = (token, now + 1080)
            }
            return token
        }
    }

    struct HubError: Error, CustomStringConvertible {
        var description: String
    }

    // MARK: Registrations

    /// `PUT …/registrations/{id}` with the platform's description (mpns is never sent to: skipped).
    func createOrUpdate(id: String, platform: Platform, handle: String, tags: Set<String>) async throws {
        let base = try await hubBase()
        var description: RegistrationXML.Description
        switch platform {
        case .apns: description = Self.description(.apple, "AppleRegistrationDescription", handle, tags)
        case .fcm: description = Self.description(.fcmv1, "FcmV1RegistrationDescription", handle, tags)
        case .wns:
            description = Self.description(.windows, "WindowsRegistrationDescription", try await channelURI(handle), tags)
        case .webpush:
            // The handle is the subscription's JSON, checked when it was registered.
            let (subscription, _, _) = try WebPushSubscription.parse(handle)
            description = Self.description(.browser, "BrowserRegistrationDescription", subscription.endpoint, tags)
            description.browserKeys = BrowserKeys(p256dh: subscription.keys.p256dh, auth: subscription.keys.auth)
        case .mpns: return
        }
        let body = RegistrationXML.requestEntry(description)
        let status = try await execute(
            .PUT, "\(base)/registrations/\(PushSender.pathSegment(id))", body: Data(body.utf8),
            headers: [("Content-Type", "application/atom+xml;type=entry;charset=utf-8")]
        ).status
        guard status == 200 || status == 201 else { throw HubError(description: "hub answered \(status) to a registration") }
    }

    static func description(_ platform: HubPlatform, _ element: String, _ handle: String, _ tags: Set<String>) -> RegistrationXML.Description {
        .init(platform: platform, handle: handle, tags: tags.sorted(), pushVariables: nil, secondaryTileName: nil, template: nil, elementName: element)
    }

    /// `DELETE …/registrations/{id}` with `If-Match: "*"`, as the SDK sends it; a missing one is fine.
    func delete(id: String) async throws {
        let status = try await execute(.DELETE, "\(try await hubBase())/registrations/\(PushSender.pathSegment(id))", headers: [("If-Match", "\"*\"")]).status
        guard status == 200 || status == 404 else { throw HubError(description: "hub answered \(status) to a delete") }
    }

    /// A WNS handle as the hub keeps it: a channel URI (a bare channel id is one on the push service).
    func channelURI(_ handle: String) async throws -> String {
        handle.hasPrefix("http://") || handle.hasPrefix("https://") ? handle : "\(try await baseURL().trimmingSuffix("/"))/wns/\(PushSender.pathSegment(handle))"
    }

    /// The seed's `POST /api/register?handle=`: every registration of `handle` but `keep` goes.
    func deleteOthers(handle: String, keep: String) async throws {
        let base = try await hubBase()
        // A browser's registrations are found by its endpoint.
        let channel: String
        if let endpoint = try? WebPushSubscription.parse(handle).subscription.endpoint {
            channel = endpoint
        } else {
            channel = try await channelURI(handle)
        }
        for candidate in channel == handle ? [handle] : [handle, channel] {
            let filter = SharedAccessSignature.formEncode("ChannelUri eq '\(candidate.replacingOccurrences(of: "'", with: "''"))'")
            let response = try await execute(.GET, "\(base)/registrations", query: "&$filter=\(filter)&$top=100")
            guard response.status == 200 else { throw HubError(description: "hub answered \(response.status) to a query") }
            for id in Self.registrationIDs(in: response.body) where id != keep {
                try await delete(id: id)
            }
        }
    }

    /// The `RegistrationId`s of a feed.
    static func registrationIDs(in feed: Data) -> [String] {
        let text = String(decoding: feed, as: UTF8.self)
        var ids: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "<RegistrationId>"), let close = rest[open.upperBound...].range(of: "</RegistrationId>") {
            ids.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return ids
    }

    // MARK: Sends

    /// One hub send of `notification` to `tag`; true when the hub took it (201).
    func send(_ notification: NativeNotification, tag: String) async -> Bool {
        var headers: [(String, String)] = [("ServiceBusNotification-Tags", tag)]
        var body: Data
        switch notification.platform {
        case .apns:
            headers += [("ServiceBusNotification-Format", "apple"), ("apns-push-type", notification.pushType), ("apns-priority", notification.pushType == "alert" ? "10" : "5")]
            body = notification.bodyJSON
        case .fcm:
            headers.append(("ServiceBusNotification-Format", "fcmv1"))
            body = Data(JSONValue.text(["message": .object(notification.body ?? [:])]).utf8)
        case .wns:
            // Raw pushes are held for an offline device too, as the built-in sender asks.
            headers += [("ServiceBusNotification-Format", "windows"), ("X-WNS-Type", notification.pushType), ("X-WNS-Cache-Policy", "cache")]
            body = Data((notification.text ?? "").utf8)
        case .webpush:
            // The payload the hub encrypts for each browser.
            headers += [("ServiceBusNotification-Format", "browser"), ("Urgency", "normal")]
            body = notification.bodyJSON
        case .mpns:
            return false
        }
        headers.append(("Content-Type", notification.platform == .wns ? "application/xml" : "application/json;charset=utf-8"))
        for attempt in 0..<max(1, maxAttempts) {
            if attempt > 0 { try? await Task.sleep(for: .milliseconds(20 << min(attempt, 8))) }
            guard let base = try? await hubBase() else { continue }
            let outgoing = TracePropagation.outgoing("POST", url: "\(base)/messages")
            guard let response = try? await execute(.POST, "\(base)/messages", body: body, headers: headers + (outgoing?.headers ?? TracePropagation.headers))
            else {
                outgoing?.finish(status: nil, error: "unreachable")
                continue
            }
            outgoing?.finish(status: response.status)
            // Throttled or unavailable before anything was sent: worth another try.
            if response.status == 429 || response.status == 503 { continue }
            return response.status == 201 || response.status == 200
        }
        return false
    }

    // MARK: HTTP

    private func hubBase() async throws -> String {
        "\(try await baseURL().trimmingSuffix("/"))/\(hubName)"
    }

    struct Answer {
        var status: Int
        var body: Data
    }

    private func execute(_ method: HTTPMethod, _ url: String, query: String = "", body: Data? = nil, headers: [(String, String)] = []) async throws -> Answer {
        var request = HTTPClientRequest(url: "\(url)?api-version=\(Self.apiVersion)\(query)")
        request.method = method
        request.headers.add(name: "Authorization", value: tokens.token(for: url, connection: connection, now: Int64(Date().timeIntervalSince1970)))
        request.headers.add(name: "TrackingId", value: UUIDText.unguessable(upper: true))
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(request, timeout: .nanoseconds(requestTimeout.nanosecondCount))
        let buffer = try await response.body.collect(upTo: 4 * 1024 * 1024)
        return Answer(status: Int(response.status.code), body: Data(buffer.readableBytesView))
    }
}
