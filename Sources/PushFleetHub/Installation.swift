public import Foundation
import Synchronization

/// An installation (`PUT/PATCH/GET/DELETE …/installations/{id}`): a device's handle, tags and
/// templates in one JSON document. The hub keeps it as the registrations it expands to — one
/// native registration, and one per template — tagged `$InstallationId:{id}` (and
/// `$UserId:{userId}`), as the service does.
public struct Installation: Sendable, Equatable {
    public struct Template: Sendable, Equatable {
        public var body: String
        public var headers: [HubRegistration.Header] = []
        public var expiry: String?
        public var tags: [String] = []
    }

    public var installationID: String
    public var platform: HubPlatform
    /// The device token, registration token or channel URI; a browser's endpoint.
    public var pushChannel: String
    /// A browser's keys: its `pushChannel` is `{endpoint, p256dh, auth}`.
    public var browserKeys: BrowserKeys?
    public var pushChannelExpired = false
    public var userID: String?
    public var tags: [String] = []
    /// By name, in name order.
    public var templates: [String: Template] = [:]
    public var expiresAt: Int64?

    public struct Failure: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    public static let maxIDLength = 256

    // MARK: JSON

    /// Parses the JSON body of a PUT.
    public init(json data: Data, id: String) throws(Failure) {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw Failure(description: "the body must be an installation JSON object")
        }
        try self.init(object: object, id: id)
    }

    init(object: [String: Any], id: String) throws(Failure) {
        if let given = object["installationId"], (given as? String) != id {
            throw Failure(description: "installationId must be a string equal to the id in the URL")
        }
        guard let platformName = object["platform"] as? String, let platform = HubPlatform(installationPlatform: platformName) else {
            throw Failure(description: "platform must be apns, gcm, fcmv1, wns or browser")
        }
        let (channel, keys) = try Self.pushChannel(object["pushChannel"], platform: platform)
        self.installationID = id
        self.platform = platform
        self.pushChannel = channel
        self.browserKeys = keys
        self.userID = try Self.optionalString(object["userId"], "userId")
        self.tags = try Self.tagList(object["tags"] ?? [])
        if let templates = object["templates"] {
            guard let map = templates as? [String: Any] else { throw Failure(description: "templates must be an object of named templates") }
            for (name, value) in map {
                templatesSet(name, try Self.template(value, name: name))
            }
        }
    }

    /// A device token, registration token or channel URI; for a browser, the subscription
    /// `{endpoint, p256dh, auth}`.
    static func pushChannel(_ value: Any?, platform: HubPlatform) throws(Failure) -> (String, BrowserKeys?) {
        if platform == .browser {
            guard let object = value as? [String: Any], let endpoint = object["endpoint"] as? String, !endpoint.isEmpty,
                endpoint.utf8.count <= 4096
            else { throw Failure(description: "a browser's pushChannel is {endpoint, p256dh, auth}") }
            guard BrowserKeys.isEndpoint(endpoint) else { throw Failure(description: BrowserKeys.endpointRequirement) }
            guard let keys = BrowserKeys(p256dh: object["p256dh"] as? String ?? "", auth: object["auth"] as? String ?? "") else {
                throw Failure(description: BrowserKeys.requirement)
            }
            return (endpoint, keys)
        }
        guard let channel = value as? String, !channel.isEmpty, channel.utf8.count <= 4096 else {
            throw Failure(description: "pushChannel is required (a device token, registration token or channel URI)")
        }
        return (HubRegistration.normalizedHandle(channel, platform: platform), nil)
    }

    private mutating func templatesSet(_ name: String, _ template: Template) {
        templates[name] = template
    }

    static func optionalString(_ value: Any?, _ key: String) throws(Failure) -> String? {
        guard let value, !(value is NSNull) else { return nil }
        guard let text = value as? String, text.utf8.count <= 1024 else { throw Failure(description: "\(key) must be a string") }
        return text
    }

    static func tagList(_ value: Any) throws(Failure) -> [String] {
        let list: [Any]
        if let one = value as? String {
            list = [one]
        } else if let many = value as? [Any] {
            list = many
        } else {
            throw Failure(description: "tags must be an array of strings")
        }
        var tags: [String] = []
        for item in list {
            if let tag = item as? String, TagExpression.isReserved(tag[...]) { throw Failure(description: TagExpression.reservedTagMessage) }
            guard let tag = item as? String, TagExpression.isValidTag(tag[...]) else {
                throw Failure(description: "invalid tag \(item): 1-\(TagExpression.maxTagLength) characters of A-Z a-z 0-9 _@#.:-")
            }
            if !tags.contains(tag) { tags.append(tag) }
        }
        return tags
    }

    /// A template: an object (or, in a PATCH value, a JSON string of one) with `body`,
    /// optional `headers`, `expiry` and `tags`.
    static func template(_ value: Any, name: String) throws(Failure) -> Template {
        var value = value
        if let text = value as? String, let parsed = try? JSONSerialization.jsonObject(with: Data(text.utf8)) { value = parsed }
        guard !name.isEmpty, name.count <= RegistrationXML.maxTemplateNameLength, let object = value as? [String: Any],
            let body = object["body"] as? String, !body.isEmpty
        else { throw Failure(description: "template '\(name)' must be an object with a non-empty body") }
        var template = Template(body: body)
        if let headers = object["headers"] {
            guard let map = headers as? [String: String] else { throw Failure(description: "template headers must be strings") }
            template.headers = map.sorted { $0.key < $1.key }.map { .init($0.key, $0.value) }
        }
        template.expiry = try optionalString(object["expiry"], "expiry")
        template.tags = try tagList(object["tags"] ?? [])
        return template
    }

    /// The JSON the service returns from a GET.
    public func json() -> Data {
        var text = "{\"installationId\":\(Self.quote(installationID))"
        if let userID { text += ",\"userId\":\(Self.quote(userID))" }
        if let browserKeys {
            text += ",\"pushChannel\":{\"endpoint\":\(Self.quote(pushChannel)),\"p256dh\":\(Self.quote(browserKeys.p256dh)),\"auth\":\(Self.quote(browserKeys.auth))}"
        } else {
            text += ",\"pushChannel\":\(Self.quote(pushChannel))"
        }
        text += ",\"pushChannelExpired\":\(pushChannelExpired)"
        text += ",\"platform\":\(Self.quote(platform.installationName))"
        text += ",\"expirationTime\":\(Self.quote(expiresAt.map(RegistrationXML.timestamp) ?? RegistrationXML.never))"
        if !tags.isEmpty { text += ",\"tags\":[" + tags.map(Self.quote).joined(separator: ",") + "]" }
        if !templates.isEmpty {
            text += ",\"templates\":{"
            text += templates.keys.sorted().map { name in
                let template = templates[name]!
                var entry = "\(Self.quote(name)):{\"body\":\(Self.quote(template.body))"
                if !template.headers.isEmpty {
                    entry += ",\"headers\":{" + template.headers.map { "\(Self.quote($0.name)):\(Self.quote($0.value))" }.joined(separator: ",") + "}"
                }
                if let expiry = template.expiry { entry += ",\"expiry\":\(Self.quote(expiry))" }
                if !template.tags.isEmpty { entry += ",\"tags\":[" + template.tags.map(Self.quote).joined(separator: ",") + "]" }
                return entry + "}"
            }.joined(separator: ",")
            text += "}"
        }
        return Data((text + "}").utf8)
    }

    static func quote(_ text: String) -> String { TemplateExpansion.jsonString(text) }

    // MARK: JSON Patch

    /// Applies `PATCH` operations: `add`/`replace`/`remove` on `/tags` (`/tags/{tag}` to remove
    /// one), `/userId`, `/pushChannel` and `/templates/{name}` (`…/body`, `…/tags`, `…/headers`).
    public func patched(_ data: Data) throws(Failure) -> Installation {
        guard let operations = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]], !operations.isEmpty,
            operations.count <= 100
        else { throw Failure(description: "the body must be a JSON Patch array of 1 to 100 operations") }
        var result = self
        for operation in operations {
            guard let op = operation["op"] as? String, let path = operation["path"] as? String, path.hasPrefix("/") else {
                throw Failure(description: "every operation needs an op and a path")
            }
            let value = operation["value"]
            let parts = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map {
                $0.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            }
            switch (op.lowercased(), parts.first ?? "", parts.count) {
            case ("add", "tags", 1):
                for tag in try Self.tagList(value ?? []) where !result.tags.contains(tag) { result.tags.append(tag) }
            case ("replace", "tags", 1):
                result.tags = try Self.tagList(value ?? [])
            case ("remove", "tags", 1):
                result.tags = []
            case ("remove", "tags", 2):
                result.tags.removeAll { $0 == parts[1] }
            case ("add", "userId", 1), ("replace", "userId", 1):
                result.userID = try Self.optionalString(value, "userId")
            case ("remove", "userId", 1):
                result.userID = nil
            case ("add", "pushChannel", 1), ("replace", "pushChannel", 1):
                (result.pushChannel, result.browserKeys) = try Self.pushChannel(value, platform: result.platform)
                result.pushChannelExpired = false
            case ("add", "templates", 2), ("replace", "templates", 2):
                result.templates[parts[1]] = try Self.template(value ?? NSNull(), name: parts[1])
            case ("remove", "templates", 2):
                guard result.templates.removeValue(forKey: parts[1]) != nil else {
                    throw Failure(description: "no template '\(parts[1])' to remove")
                }
            case ("add", "templates", 3), ("replace", "templates", 3):
                guard var template = result.templates[parts[1]] else { throw Failure(description: "no template '\(parts[1])'") }
                switch parts[2] {
                case "body":
                    guard let body = value as? String, !body.isEmpty else { throw Failure(description: "a template body is a string") }
                    template.body = body
                case "tags": template.tags = try Self.tagList(value ?? [])
                case "expiry": template.expiry = try Self.optionalString(value, "expiry")
                default: throw Failure(description: "path \(path) cannot be changed")
                }
                result.templates[parts[1]] = template
            default:
                throw Failure(description: "'\(op) \(path)' is not a supported installation patch")
            }
        }
        return result
    }

    // MARK: Registrations

    /// The native registration and one per template, with the implicit tags.
    func registrations() -> [RegistrationXML.Description] {
        var implicit = ["$InstallationId:{\(installationID)}"]
        if let userID { implicit.append("$UserId:{\(userID)}") }
        let native = RegistrationXML.Description(
            platform: platform, handle: pushChannel, tags: implicit + tags, pushVariables: nil, secondaryTileName: nil, template: nil,
            elementName: RegistrationXML.elementName(platform, template: false), browserKeys: browserKeys
        )
        let templated = templates.keys.sorted().map { name in
            let template = templates[name]!
            var tagSet = implicit + tags
            for tag in template.tags where !tagSet.contains(tag) { tagSet.append(tag) }
            return RegistrationXML.Description(
                platform: platform, handle: pushChannel, tags: tagSet, pushVariables: nil, secondaryTileName: nil,
                template: .init(body: template.body, name: name, expiry: template.expiry, headers: template.headers),
                elementName: RegistrationXML.elementName(platform, template: true), browserKeys: browserKeys
            )
        }
        return [native] + templated
    }
}

extension HubStore {
    /// `PUT …/installations/{id}`: replaces the installation and its registrations.
    public func putInstallation(_ installation: Installation, now: Int64) -> Result<Void, Failure> {
        guard installation.templates.count <= limits.maxTemplatesPerInstallation else {
            return .failure(.invalid("an installation may have at most \(limits.maxTemplatesPerInstallation) templates"))
        }
        let descriptions = installation.registrations()
        for description in descriptions {
            if let problem = check(description) { return .failure(problem) }
        }
        return state.withLock { state in
            let old = state.installationRegistrations[installation.installationID] ?? []
            guard state.installations[installation.installationID] != nil || state.installations.count < limits.maxInstallations,
                state.registrations.count - old.count + descriptions.count <= limits.maxRegistrations
            else { return .failure(.quotaExceeded("the hub is full")) }
            for id in old { state.remove(id) }
            var stored = installation
            stored.expiresAt = expiry(now)
            var ids: [String] = []
            // Registrations of an expired push channel are not sent to until the channel changes.
            if !installation.pushChannelExpired {
                for description in descriptions {
                    state.serial += 1
                    let id = "\(installation.installationID.count <= 64 ? installation.installationID : "installation")-\(state.serial)"
                    var registration = HubRegistration(
                        id: id, platform: description.platform, handle: description.handle, tags: description.tags, template: description.template,
                        browserKeys: description.browserKeys
                    )
                    registration.createdAt = now
                    registration.updatedAt = now
                    registration.expiresAt = stored.expiresAt
                    registration.installationID = installation.installationID
                    state.insert(registration)
                    ids.append(id)
                }
            }
            state.installations[installation.installationID] = stored
            state.installationRegistrations[installation.installationID] = ids
            return .success(())
        }
    }

    public func installation(_ id: String, now: Int64) -> Installation? {
        state.withLock { state in
            guard let installation = state.installations[id] else { return nil }
            if let expiresAt = installation.expiresAt, expiresAt <= now {
                for registration in state.installationRegistrations.removeValue(forKey: id) ?? [] { state.remove(registration) }
                state.installations[id] = nil
                return nil
            }
            return installation
        }
    }

    @discardableResult
    public func deleteInstallation(_ id: String) -> Bool {
        state.withLock { state in
            for registration in state.installationRegistrations.removeValue(forKey: id) ?? [] { state.remove(registration) }
            return state.installations.removeValue(forKey: id) != nil
        }
    }
}
