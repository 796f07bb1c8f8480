import Foundation
import HTTPTypes
public import Hummingbird
import NIOCore
import PushFleetCore
import PushFleetServerSupport

/// The Notification Hubs REST API of one hub, at `/{hub}/…` on the push service's router:
/// registrations (Atom XML), installations (JSON), sends. Thin: it parses, authenticates and
/// maps the hub's results to the service's status codes and headers.
public struct HubEndpoint: Sendable {
    public let hub: NotificationHub

    public init(hub: NotificationHub) {
        self.hub = hub
    }

    static let maxEntityBytes = 64 * 1024
    static let defaultAPIVersion = "2020-06"

    public func register(on router: Router<BasicRequestContext>) {
        for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete] {
            router.on("/:hub/**", method: method) { request, context in
                await handle(request, hubName: context.parameters.get("hub") ?? "", rest: context.parameters.getCatchAll().map(String.init))
            }
        }
    }

    struct Call {
        var request: Request
        /// The query, form-decoded (`+` is a space, as .NET's `HttpUtility.UrlEncode` writes it).
        var query: [String: String]
        var trackingID: String
        /// `https://{namespace}.servicebus.windows.net/{hub}` or `http://{host}/{hub}`.
        var base: String
        var apiVersion: String

        func url(_ path: String) -> String { "\(base)/\(path)?api-version=\(apiVersion)" }
    }

    func handle(_ request: Request, hubName: String, rest: [String]) async -> Response {
        let trackingID = request.headers[.trackingID].flatMap { $0.count <= 64 ? $0 : nil } ?? UUID().uuidString
        let query = Self.formQuery(request.uri.query)
        let apiVersion = query["api-version"].flatMap { $0.count <= 16 ? $0 : nil } ?? Self.defaultAPIVersion
        guard hubName.lowercased() == hub.settings.hubName.lowercased() else {
            return Self.error(.notFound, "no hub named '\(hubName)' in this namespace", trackingID: trackingID)
        }
        let segments = rest.map { $0.removingPercentEncoding ?? $0 }
        let route = HubRoute.resolve(method: request.method.rawValue, segments: segments)
        switch route {
        case .notFound: return Self.error(.notFound, "no such resource", trackingID: trackingID)
        case .methodNotAllowed: return Self.error(.methodNotAllowed, "\(request.method) is not allowed here", trackingID: trackingID)
        default: break
        }
        let host = Self.host(of: request)
        let resource = ([host, hubName] + rest).joined(separator: "/").lowercased()
        let rights: Set<SharedAccessSignature.Right>
        switch hub.tokens.verify(
            request.headers[.authorization], rules: hub.settings.rules, resource: resource,
            hosts: [host, hub.settings.namespaceHost], now: hub.now() / 1_000_000_000
        ) {
        case .success(let granted): rights = granted
        case .failure(let failure): return Self.error(.unauthorized, failure.description, trackingID: trackingID)
        }
        let filtered = query["$filter"] != nil
        let needed: SharedAccessSignature.Right = route == .queryRegistrations && filtered ? .listen : route.requiredRight
        guard rights.contains(needed) else {
            return Self.error(.forbidden, "the token's key lacks the \(needed.rawValue) right", trackingID: trackingID)
        }
        let scheme = host.hasSuffix(".servicebus.windows.net") ? "https" : "http"
        let authority = request.head.authority ?? host
        let call = Call(request: request, query: query, trackingID: trackingID, base: "\(scheme)://\(authority)/\(hubName)", apiVersion: apiVersion)
        return await dispatch(route, call)
    }

    private func dispatch(_ route: HubRoute, _ call: Call) async -> Response {
        switch route {
        case .createRegistrationID:
            let id = hub.store.newRegistrationID(now: hub.now())
            return .empty(status: .created, headers: headers(call, [.location: call.url("registrationids/\(id)")]))
        case .createRegistration:
            return await putRegistration(id: nil, call)
        case .putRegistration(let id):
            return await putRegistration(id: id, call)
        case .readRegistration(let id):
            guard let registration = hub.store.registration(id, now: hub.now()) else {
                return Self.error(.notFound, "registration \(id) does not exist", trackingID: call.trackingID)
            }
            return entry(registration, call)
        case .deleteRegistration(let id):
            let condition = call.request.headers[.ifMatch].flatMap(HubStore.ETagCondition.init(header:))
            switch hub.store.delete(id: id, ifMatch: condition, now: hub.now()) {
            case .success: return .empty(headers: headers(call))
            case .failure(let failure): return storeError(failure, call)
            }
        case .queryRegistrations:
            return query(call)
        case .tagRegistrations(let tag):
            return feed(.tag(tag), path: "tags/\(tag)/registrations", call)
        case .readInstallation(let id):
            guard let installation = hub.store.installation(id, now: hub.now()) else {
                return Self.error(.notFound, "installation \(id) does not exist", trackingID: call.trackingID)
            }
            // The service labels the installation's JSON application/xml.
            return .bytes(installation.json(), headers: headers(call), contentType: "application/xml; charset=utf-8")
        case .putInstallation(let id), .patchInstallation(let id):
            return await putInstallation(id: id, patch: route == .patchInstallation(id), call)
        case .deleteInstallation(let id):
            hub.store.deleteInstallation(id)
            return .empty(status: .noContent, headers: headers(call))
        case .send:
            return await send(call)
        case .methodNotAllowed, .notFound:
            return Self.error(.notFound, "no such resource", trackingID: call.trackingID)
        }
    }

    // MARK: Registrations

    private func putRegistration(id: String?, _ call: Call) async -> Response {
        if let id, !Self.isValidID(id) { return Self.error(.badRequest, "invalid registration id", trackingID: call.trackingID) }
        guard let body = await Self.body(call.request, limit: Self.maxEntityBytes) else {
            return Self.error(.contentTooLarge, "the registration is over \(Self.maxEntityBytes) bytes", trackingID: call.trackingID)
        }
        let description: RegistrationXML.Description
        do { description = try RegistrationXML.parse(body) } catch { return Self.error(.badRequest, error.description, trackingID: call.trackingID) }
        let condition: HubStore.ETagCondition?
        if let header = call.request.headers[.ifMatch] {
            guard let parsed = HubStore.ETagCondition(header: header) else {
                return Self.error(.badRequest, "If-Match must be * or an ETag", trackingID: call.trackingID)
            }
            condition = parsed
        } else {
            condition = nil
        }
        let result = id.map { hub.store.createOrUpdate(id: $0, description, ifMatch: condition, now: hub.now()) } ?? hub.store.create(description, now: hub.now())
        switch result {
        case .success(let registration): return entry(registration, call, contentLocation: true)
        case .failure(let failure): return storeError(failure, call)
        }
    }

    private func query(_ call: Call) -> Response {
        guard let filter = call.query["$filter"] else {
            return feed(.all, path: "registrations", call)
        }
        // `ChannelUri eq '…'` (any handle field name; the SDK always writes ChannelUri).
        let pattern = #"^\s*(ChannelUri|DeviceToken|GcmRegistrationId|FcmRegistrationId|FcmV1RegistrationId)\s+eq\s+'(.*)'\s*$"#
        guard let match = filter.range(of: pattern, options: [.regularExpression, .caseInsensitive]).map({ filter[$0] }),
            let quote = match.firstIndex(of: "'"), let end = match.lastIndex(of: "'"), quote < end
        else {
            return Self.error(.badRequest, "$filter supports only \"ChannelUri eq '…'\" (or DeviceToken, GcmRegistrationId, FcmV1RegistrationId)", trackingID: call.trackingID)
        }
        let handle = String(match[match.index(after: quote)..<end]).replacingOccurrences(of: "''", with: "'")
        return feed(.handle(handle), path: "registrations", call)
    }

    private func feed(_ filter: HubStore.Filter, path: String, _ call: Call) -> Response {
        let query = call.query
        var top = 100
        if let text = query["$top"] {
            guard let value = Int(text), (1...100).contains(value) else {
                return Self.error(.badRequest, "$top must be 1 to 100", trackingID: call.trackingID)
            }
            top = value
        }
        let continuation = query["continuationtoken"].flatMap(Self.idFromToken)
        let (page, next) = hub.store.query(filter, top: top, continuation: continuation, now: hub.now())
        let selfURL = XMLText.escape(call.url(path))
        var xml = "<feed xmlns=\"\(RegistrationXML.atomNamespace)\"><title type=\"text\">Registrations</title><id>\(selfURL)</id>"
        xml += "<updated>\(RegistrationXML.timestamp(hub.now()))</updated><link rel=\"self\" href=\"\(selfURL)\"/>"
        for registration in page {
            xml += entryXML(registration, call, inFeed: true)
        }
        xml += "</feed>"
        var extra: HTTPFields = [:]
        if let next { extra[.continuationToken] = Self.token(forID: next) }
        return .bytes(Data(xml.utf8), headers: headers(call, extra), contentType: "application/atom+xml; type=feed; charset=utf-8")
    }

    private func entry(_ registration: HubRegistration, _ call: Call, contentLocation: Bool = false) -> Response {
        var extra: HTTPFields = [.eTag: "W/\"\(registration.etag)\""]
        if contentLocation { extra[.contentLocation] = call.url("registrations/\(registration.id)") }
        return .bytes(
            Data(entryXML(registration, call, inFeed: false).utf8), headers: headers(call, extra),
            contentType: "application/atom+xml; type=entry; charset=utf-8"
        )
    }

    private func entryXML(_ registration: HubRegistration, _ call: Call, inFeed: Bool) -> String {
        let url = XMLText.escape(call.url("registrations/\(registration.id)"))
        let namespaces = inFeed ? "" : " xmlns=\"\(RegistrationXML.atomNamespace)\""
        var xml = "<entry a:etag=\"W/&quot;\(registration.etag)&quot;\"\(namespaces) xmlns:a=\"\(RegistrationXML.metadataNamespace)\">"
        xml += "<id>\(url)</id><title type=\"text\">\(XMLText.escape(registration.id))</title>"
        xml += "<published>\(RegistrationXML.timestamp(registration.createdAt))</published>"
        xml += "<updated>\(RegistrationXML.timestamp(registration.updatedAt))</updated><link rel=\"self\" href=\"\(url)\"/>"
        xml += "<content type=\"application/xml\">\(RegistrationXML.descriptionXML(registration))</content></entry>"
        return xml
    }

    // MARK: Installations

    private func putInstallation(id: String, patch: Bool, _ call: Call) async -> Response {
        guard Self.isValidID(id), id.count <= Installation.maxIDLength else {
            return Self.error(.badRequest, "invalid installation id", trackingID: call.trackingID)
        }
        guard let body = await Self.body(call.request, limit: Self.maxEntityBytes) else {
            return Self.error(.contentTooLarge, "the installation is over \(Self.maxEntityBytes) bytes", trackingID: call.trackingID)
        }
        let installation: Installation
        do {
            if patch {
                guard let current = hub.store.installation(id, now: hub.now()) else {
                    return Self.error(.notFound, "installation \(id) does not exist", trackingID: call.trackingID)
                }
                installation = try current.patched(body)
            } else {
                installation = try Installation(json: body, id: id)
            }
        } catch {
            return Self.error(.badRequest, error.description, trackingID: call.trackingID)
        }
        switch hub.store.putInstallation(installation, now: hub.now()) {
        case .success: return .empty(headers: headers(call, [.contentType: "application/xml; charset=utf-8"]))
        case .failure(let failure): return storeError(failure, call)
        }
    }

    // MARK: Sends

    private func send(_ call: Call) async -> Response {
        let request = call.request
        guard let body = await Self.body(request, limit: hub.settings.maxMessageBytes) else {
            return Self.error(.contentTooLarge, "the message size cannot be over \(hub.settings.maxMessageBytes / 1024)Kb", trackingID: call.trackingID)
        }
        guard let format = request.headers[.notificationFormat] else {
            return Self.error(.badRequest, "ServiceBusNotification-Format is required", trackingID: call.trackingID)
        }
        let direct = call.query["direct"] != nil
        let handle = request.headers[.deviceHandle]
        if direct, handle?.isEmpty ?? true {
            return Self.error(.badRequest, "a direct send needs ServiceBusNotification-DeviceHandle", trackingID: call.trackingID)
        }
        let sendRequest = NotificationHub.SendRequest(
            format: format, tags: request.headers[.notificationTags], directHandle: direct ? handle : nil, body: body,
            headers: request.headers.map { .init($0.name.rawName, $0.value) }
        )
        switch await hub.send(sendRequest) {
        case .success(let report):
            var location = call.url("messages/\(report.notificationID)")
            if direct { location += "&direct" }
            return .empty(status: .created, headers: headers(call, [.location: location, .contentType: "application/xml; charset=utf-8"]))
        case .failure(let failure):
            return Self.error(HTTPResponse.Status(code: failure.statusCode), failure.description, trackingID: call.trackingID)
        }
    }

    // MARK: Helpers

    private func headers(_ call: Call, _ extra: HTTPFields = [:]) -> HTTPFields {
        var fields = extra
        fields[.trackingID] = call.trackingID
        fields[.correlationRequestID] = call.trackingID
        return fields
    }

    private func storeError(_ failure: HubStore.Failure, _ call: Call) -> Response {
        let status: HTTPResponse.Status =
            switch failure {
            case .notFound: .notFound
            case .preconditionFailed: .preconditionFailed
            case .gone: .gone
            case .quotaExceeded: .forbidden
            case .invalid: .badRequest
            }
        return Self.error(status, failure.description, trackingID: call.trackingID)
    }

    /// The service's error body: `<Error><Code>…</Code><Detail>… TrackingId:…</Detail></Error>`.
    static func error(_ status: HTTPResponse.Status, _ detail: String, trackingID: String) -> Response {
        let xml = "<Error><Code>\(status.code)</Code><Detail>\(XMLText.escape(detail)). TrackingId:\(trackingID),TimeStamp:\(RegistrationXML.timestamp(Int64(Date().timeIntervalSince1970 * 1e9)))</Detail></Error>"
        return .bytes(Data(xml.utf8), status: status, headers: [.trackingID: trackingID], contentType: "application/xml; charset=utf-8")
    }

    /// `application/x-www-form-urlencoded` pairs; a key without `=` maps to "". Keys are
    /// decoded too (`%24filter`); the first of a repeated key wins.
    static func formQuery(_ raw: String?) -> [String: String] {
        var pairs: [String: String] = [:]
        for part in (raw ?? "").split(separator: "&").prefix(64) {
            let split = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                guard text.contains(where: { $0 == "%" || $0 == "+" }) else { return String(text) }
                return SharedAccessSignature.percentDecode(text.replacingOccurrences(of: "+", with: " ")[...]) ?? String(text)
            }
            let key = decode(split[0])
            if pairs[key] == nil { pairs[key] = split.count > 1 ? decode(split[1]) : "" }
        }
        return pairs
    }

    /// A continuation token: the last id of the page, base64url (clients append it to the query unescaped).
    static func token(forID id: String) -> String {
        Base64URL.encode(Data(id.utf8))
    }

    /// Padding a client added is let through, as before.
    static func idFromToken(_ token: String) -> String? {
        guard token.utf8.count <= 1024 else { return nil }
        var unpadded = Substring(token)
        while unpadded.last == "=" { unpadded.removeLast() }
        return Base64URL.decode(unpadded).flatMap { String(validating: $0, as: UTF8.self) }
    }

    static func host(of request: Request) -> String {
        var host = (request.head.authority ?? "").lowercased()
        if host.hasPrefix("["), let end = host.firstIndex(of: "]") {
            host = String(host[...end])
        } else if let colon = host.lastIndex(of: ":") {
            host = String(host[..<colon])
        }
        return host
    }

    static func isValidID(_ id: String) -> Bool {
        (1...256).contains(id.utf8.count) && id.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F && $0 != "/" && $0 != "?" && $0 != "#" }
    }

    static func body(_ request: Request, limit: Int) async -> Data? {
        var request = request
        do {
            let buffer = try await request.collectBody(upTo: limit)
            return Data(buffer.readableBytesView)
        } catch {
            return nil
        }
    }
}

extension HTTPField.Name {
    static let trackingID = Self("TrackingId")!
    static let correlationRequestID = Self("x-ms-correlation-request-id")!
    static let continuationToken = Self("x-ms-continuationtoken")!
    static let notificationFormat = Self("ServiceBusNotification-Format")!
    static let notificationTags = Self("ServiceBusNotification-Tags")!
    static let deviceHandle = Self("ServiceBusNotification-DeviceHandle")!
}
