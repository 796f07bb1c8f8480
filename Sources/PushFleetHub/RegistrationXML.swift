public import Foundation

#if canImport(FoundationXML)
import FoundationXML
import PushFleetCore
#endif

/// Registration descriptions in the Atom XML the REST API speaks, in both directions.
///
/// Reading follows the service's DataContract rules: members are read in their declared order,
/// an element out of order or unknown is ignored (kept as extension data by the service), and
/// a missing required member is an error. Writing emits members in that order, as the .NET SDK
/// and the service do.
public enum RegistrationXML {
    public static let atomNamespace = "http://www.w3.org/2005/Atom"
    public static let hubNamespace = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
    public static let instanceNamespace = "http://www.w3.org/2001/XMLSchema-instance"
    public static let metadataNamespace = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
    /// The service's "never": registrations without a time to live expire then.
    public static let never = "9999-12-31T23:59:59.9999999Z"
    public static let maxTemplateNameLength = 200

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// What a client sent: the registration's content, before the hub gives it an id and an ETag.
    public struct Description: Sendable, Equatable {
        public var platform: HubPlatform
        public var handle: String
        public var tags: [String]
        public var pushVariables: String?
        public var secondaryTileName: String?
        public var template: HubRegistration.Template?
        /// The element name the client used (`FcmRegistrationDescription`, …).
        public var elementName: String
        /// A browser registration's `P256DH` and `Auth` (its handle is the `Endpoint`).
        public var browserKeys: BrowserKeys?

        public init(
            platform: HubPlatform, handle: String, tags: [String], pushVariables: String? = nil, secondaryTileName: String? = nil,
            template: HubRegistration.Template? = nil, elementName: String, browserKeys: BrowserKeys? = nil
        ) {
            self.browserKeys = browserKeys
            self.platform = platform
            self.handle = handle
            self.tags = tags
            self.pushVariables = pushVariables
            self.secondaryTileName = secondaryTileName
            self.template = template
            self.elementName = elementName
        }
    }

    private struct Kind {
        var platform: HubPlatform
        var template: Bool
        var handleElement: String
    }

    private static func kind(of element: String) -> Kind? {
        switch element {
        case "AppleRegistrationDescription": Kind(platform: .apple, template: false, handleElement: "DeviceToken")
        case "AppleTemplateRegistrationDescription": Kind(platform: .apple, template: true, handleElement: "DeviceToken")
        case "GcmRegistrationDescription": Kind(platform: .gcm, template: false, handleElement: "GcmRegistrationId")
        case "GcmTemplateRegistrationDescription": Kind(platform: .gcm, template: true, handleElement: "GcmRegistrationId")
        case "FcmRegistrationDescription": Kind(platform: .gcm, template: false, handleElement: "FcmRegistrationId")
        case "FcmTemplateRegistrationDescription": Kind(platform: .gcm, template: true, handleElement: "FcmRegistrationId")
        case "FcmV1RegistrationDescription": Kind(platform: .fcmv1, template: false, handleElement: "FcmV1RegistrationId")
        case "FcmV1TemplateRegistrationDescription": Kind(platform: .fcmv1, template: true, handleElement: "FcmV1RegistrationId")
        case "WindowsRegistrationDescription": Kind(platform: .windows, template: false, handleElement: "ChannelUri")
        case "WindowsTemplateRegistrationDescription": Kind(platform: .windows, template: true, handleElement: "ChannelUri")
        case "BrowserRegistrationDescription": Kind(platform: .browser, template: false, handleElement: "Endpoint")
        case "BrowserTemplateRegistrationDescription": Kind(platform: .browser, template: true, handleElement: "Endpoint")
        default: nil
        }
    }

    /// The members of a description in declared order.
    private static func members(_ kind: Kind) -> [String] {
        var names = ["ETag", "ExpirationTime", "RegistrationId", "Tags", "PushVariables", kind.handleElement]
        if kind.platform == .windows { names.append("SecondaryTileName") }
        if kind.platform == .browser { names += ["P256DH", "Auth"] }
        guard kind.template else { return names }
        switch kind.platform {
        case .apple: names += ["BodyTemplate", "Expiry", "TemplateName", "Priority", "ApnsHeaders"]
        case .windows: names += ["BodyTemplate", "WnsHeaders", "TemplateName"]
        case .gcm, .fcmv1, .browser: names += ["BodyTemplate", "TemplateName"]
        }
        return names
    }

    // MARK: Reading

    /// Parses an Atom `entry` (or a bare description) into a description.
    public static func parse(_ data: Data) throws(ParseError) -> Description {
        // Well-formed or refused: the parser below recovers from errors. The check also refuses
        // a DTD in any encoding, which rules out entity expansion attacks.
        let document: Data
        do { document = try StrictXML.utf8Document(data) } catch { throw ParseError(description: "not well-formed XML: \(error.description)") }
        let reader = Reader()
        let parser = XMLParser(data: document)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        guard parser.parse(), reader.failure == nil else {
            throw ParseError(description: reader.failure ?? "not well-formed XML: \(parser.parserError.map { "\($0)" } ?? "unknown error")")
        }
        guard let element = reader.descriptionName else {
            throw ParseError(description: "no registration description (an Atom entry whose content is e.g. AppleRegistrationDescription)")
        }
        guard let kind = kind(of: element) else {
            throw ParseError(description: "\(element) is not supported here (Apple, Gcm/Fcm, FcmV1, Windows and Browser native and template registrations are)")
        }
        let order = members(kind)
        var values: [String: Reader.Member] = [:]
        var last = -1
        for member in reader.members {
            // Out of order or unknown: the service keeps it as extension data and ignores it.
            guard let rank = order.firstIndex(of: member.name), rank > last else { continue }
            last = rank
            values[member.name] = member
        }
        guard let handle = values[kind.handleElement]?.text.trimmingCharacters(in: .whitespacesAndNewlines), !handle.isEmpty,
            handle.utf8.count <= 4096
        else { throw ParseError(description: "\(kind.handleElement) is required (1 to 4096 characters)") }
        let tags = try parseTags(values["Tags"]?.text ?? "")
        var description = Description(
            platform: kind.platform, handle: HubRegistration.normalizedHandle(handle, platform: kind.platform), tags: tags,
            pushVariables: values["PushVariables"].flatMap { $0.isNil || $0.text.isEmpty ? nil : $0.text },
            secondaryTileName: values["SecondaryTileName"].flatMap { $0.isNil || $0.text.isEmpty ? nil : $0.text },
            template: nil, elementName: element
        )
        if kind.platform == .browser {
            guard BrowserKeys.isEndpoint(handle) else { throw ParseError(description: BrowserKeys.endpointRequirement) }
            guard let keys = BrowserKeys(p256dh: values["P256DH"]?.text ?? "", auth: values["Auth"]?.text ?? "") else {
                throw ParseError(description: BrowserKeys.requirement)
            }
            description.browserKeys = keys
        }
        if kind.template {
            guard let body = values["BodyTemplate"], !body.isNil, !body.text.isEmpty else {
                throw ParseError(description: "BodyTemplate is required in a template registration")
            }
            let name = values["TemplateName"].flatMap { $0.isNil || $0.text.isEmpty ? nil : $0.text }
            if let name, name.count > maxTemplateNameLength {
                throw ParseError(description: "TemplateName is longer than \(maxTemplateNameLength) characters")
            }
            let headers = (values["ApnsHeaders"] ?? values["WnsHeaders"])?.headers ?? []
            if kind.platform == .windows, !headers.contains(where: { $0.name.lowercased() == "x-wns-type" }) {
                throw ParseError(description: "a Windows template registration needs the X-WNS-Type header in WnsHeaders")
            }
            description.template = HubRegistration.Template(
                body: body.text, name: name,
                expiry: values["Expiry"].flatMap { $0.isNil || $0.text.isEmpty ? nil : $0.text },
                priority: values["Priority"].flatMap { $0.isNil || $0.text.isEmpty ? nil : $0.text },
                headers: headers
            )
        }
        return description
    }

    /// `Tags` is a comma-separated list.
    public static func parseTags(_ text: String) throws(ParseError) -> [String] {
        var tags: [String] = []
        var seen = Set<String>()
        for part in text.split(separator: ",") {
            let tag = part.trimmingCharacters(in: .whitespaces)
            guard !TagExpression.isReserved(tag[...]) else { throw ParseError(description: TagExpression.reservedTagMessage) }
            guard TagExpression.isValidTag(tag[...]) else {
                throw ParseError(description: "invalid tag '\(tag)': 1-\(TagExpression.maxTagLength) characters of A-Z a-z 0-9 _@#.:-")
            }
            if seen.insert(tag).inserted { tags.append(tag) }
        }
        return tags
    }

    // MARK: Writing

    /// The description element, as the service returns it (`ETag`, `ExpirationTime` and
    /// `RegistrationId` filled in).
    public static func descriptionXML(_ registration: HubRegistration) -> String {
        let template = registration.template != nil
        let element = elementName(registration.platform, template: template)
        var xml = "<\(element) xmlns=\"\(hubNamespace)\" xmlns:i=\"\(instanceNamespace)\">"
        xml += "<ETag>\(registration.etag)</ETag>"
        xml += "<ExpirationTime>\(registration.expiresAt.map(timestamp) ?? never)</ExpirationTime>"
        xml += "<RegistrationId>\(XMLText.escape(registration.id))</RegistrationId>"
        xml += body(
            platform: registration.platform, handle: registration.handle, tags: registration.tags,
            pushVariables: registration.pushVariables, secondaryTileName: registration.secondaryTileName, template: registration.template,
            browserKeys: registration.browserKeys
        )
        return xml + "</\(element)>"
    }

    /// A request body for `PUT …/registrations/{id}` as the .NET SDK writes it: an Atom entry,
    /// `RegistrationId` nil, no ETag or expiration.
    public static func requestEntry(_ description: Description) -> String {
        let element = description.elementName
        var xml = "<entry xmlns=\"\(atomNamespace)\"><content type=\"application/xml\">"
        xml += "<\(element) xmlns:i=\"\(instanceNamespace)\" xmlns=\"\(hubNamespace)\"><RegistrationId i:nil=\"true\" />"
        xml += body(
            platform: description.platform, handle: description.handle, tags: description.tags,
            pushVariables: description.pushVariables, secondaryTileName: description.secondaryTileName, template: description.template,
            browserKeys: description.browserKeys, handleElement: kind(of: element)?.handleElement
        )
        return xml + "</\(element)></content></entry>"
    }

    public static func elementName(_ platform: HubPlatform, template: Bool) -> String {
        let prefix =
            switch platform {
            case .apple: "Apple"
            case .gcm: "Gcm"
            case .fcmv1: "FcmV1"
            case .windows: "Windows"
            case .browser: "Browser"
            }
        return prefix + (template ? "Template" : "") + "RegistrationDescription"
    }

    private static func body(
        platform: HubPlatform, handle: String, tags: [String], pushVariables: String?, secondaryTileName: String?,
        template: HubRegistration.Template?, browserKeys: BrowserKeys? = nil, handleElement: String? = nil
    ) -> String {
        var xml = ""
        if !tags.isEmpty { xml += "<Tags>\(XMLText.escape(tags.joined(separator: ",")))</Tags>" }
        if let pushVariables { xml += "<PushVariables>\(XMLText.escape(pushVariables))</PushVariables>" }
        let handleName =
            handleElement
            ?? {
                switch platform {
                case .apple: "DeviceToken"
                case .gcm: "GcmRegistrationId"
                case .fcmv1: "FcmV1RegistrationId"
                case .windows: "ChannelUri"
                case .browser: "Endpoint"
                }
            }()
        xml += "<\(handleName)>\(XMLText.escape(handle))</\(handleName)>"
        if let browserKeys { xml += "<P256DH>\(XMLText.escape(browserKeys.p256dh))</P256DH><Auth>\(XMLText.escape(browserKeys.auth))</Auth>" }
        if platform == .windows, let secondaryTileName { xml += "<SecondaryTileName>\(XMLText.escape(secondaryTileName))</SecondaryTileName>" }
        guard let template else { return xml }
        xml += "<BodyTemplate>\(cdata(template.body))</BodyTemplate>"
        switch platform {
        case .apple:
            xml += template.expiry.map { "<Expiry>\(XMLText.escape($0))</Expiry>" } ?? "<Expiry i:nil=\"true\"/>"
            xml += template.name.map { "<TemplateName>\(XMLText.escape($0))</TemplateName>" } ?? "<TemplateName i:nil=\"true\"/>"
            if let priority = template.priority { xml += "<Priority>\(XMLText.escape(priority))</Priority>" }
            xml += headers("ApnsHeader", template.headers)
        case .windows:
            xml += headers("WnsHeader", template.headers)
            xml += template.name.map { "<TemplateName>\(XMLText.escape($0))</TemplateName>" } ?? "<TemplateName i:nil=\"true\"/>"
        case .gcm, .fcmv1, .browser:
            xml += template.name.map { "<TemplateName>\(XMLText.escape($0))</TemplateName>" } ?? "<TemplateName i:nil=\"true\"/>"
        }
        return xml
    }

    private static func headers(_ element: String, _ headers: [HubRegistration.Header]) -> String {
        guard !headers.isEmpty else { return "<\(element)s/>" }
        return "<\(element)s>"
            + headers.map { "<\(element)><Header>\(XMLText.escape($0.name))</Header><Value>\(XMLText.escape($0.value))</Value></\(element)>" }.joined()
            + "</\(element)s>"
    }

    static func cdata(_ text: String) -> String {
        "<![CDATA[" + text.replacingOccurrences(of: "]]>", with: "]]]]><![CDATA[>") + "]]>"
    }

    /// `2018-11-07T00:18:24Z` from wall-clock nanoseconds.
    public static func timestamp(_ nanoseconds: Int64) -> String {
        let date = Date(timeIntervalSince1970: Double(nanoseconds) / 1e9)
        return date.formatted(.iso8601)
    }
}
