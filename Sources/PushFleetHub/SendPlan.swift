import Foundation
import PushFleetWebPush

/// A validated send: which registrations it is for and how to make each one's native push.
struct SendPlan: Sendable {
    struct BuildFailure: Error, Equatable {
        var reason: String
    }

    /// Native format's platform; nil for a template send.
    var platform: HubPlatform?
    var expression: TagExpression?
    var body: String
    /// A template send's properties, keys lower-cased.
    var properties: [String: String] = [:]
    /// Provider headers that pass through to the push service.
    var headers: [HubRegistration.Header]
    /// The send's W3C `traceparent`, handed on with every push it makes (as a traced hub would).
    var trace: String?
    /// A native send's per-target work done once: the APNs push type, and the FCM v1 message
    /// without a token, as JSON, for the token to be spliced into.
    var applePushType: String?
    var fcmMessage: String?
    /// A direct browser send's keys (the `P256DH` and `Auth` headers).
    var directKeys: BrowserKeys?

    /// The push services' payload limits.
    static func payloadLimit(_ platform: HubPlatform) -> Int {
        switch platform {
        case .windows: 5000
        // 4,096 bytes of ciphertext, of which aes128gcm's header, delimiter and tag take 103.
        case .browser: 4096 - 103
        default: 4096
        }
    }

    /// A browser push's time to live at the push service, in seconds: a day.
    static let browserTTL = 86_400

    static func make(_ request: NotificationHub.SendRequest, settings: NotificationHub.Settings) -> Result<SendPlan, NotificationHub.SendFailure> {
        let format = request.format.trimmingCharacters(in: .whitespaces)
        let platform = HubPlatform(format: format)
        guard platform != nil || format.lowercased() == "template" else {
            return .failure(.badRequest("ServiceBusNotification-Format '\(format)' is not supported here: apple, gcm, fcmv1, windows, browser or template"))
        }
        var expression: TagExpression?
        if let tags = request.tags?.trimmingCharacters(in: .whitespaces), !tags.isEmpty {
            do { expression = try TagExpression.parse(tags) } catch { return .failure(.badRequest("ServiceBusNotification-Tags: \(error)")) }
        }
        guard let body = String(validating: request.body, as: UTF8.self), !body.isEmpty else {
            return .failure(.badRequest("the notification body must be non-empty UTF-8"))
        }
        let passthrough = request.headers.filter {
            let name = $0.name.lowercased()
            return name.hasPrefix("apns-") || name.hasPrefix("x-wns-") || name == "x-apns-priority" || name == "servicebusnotification-apns-expiry"
                || name == "urgency" || name == "topic"
        }
        var plan = SendPlan(platform: platform, expression: expression, body: body, headers: passthrough)
        plan.trace = Self.header("traceparent", in: request.headers)
        guard let platform else {
            do { plan.properties = try TemplateExpansion.properties(request.body) } catch { return .failure(.badRequest(error.description)) }
            return .success(plan)
        }
        if request.body.count > payloadLimit(platform) {
            return .failure(.tooLarge("the \(platform.rawValue) payload is \(request.body.count) bytes, over the push service's \(payloadLimit(platform))"))
        }
        switch platform {
        case .apple:
            guard let object = Self.object(body) else { return .failure(.badRequest("an apple notification's body must be a JSON object")) }
            plan.applePushType = Self.apnsPushType(object)
        case .gcm:
            guard let object = Self.object(body) else { return .failure(.badRequest("a gcm notification's body must be a JSON object")) }
            plan.fcmMessage = Self.messageJSON(Self.v1Message(legacy: object))
        case .fcmv1:
            guard let message = Self.object(body)?["message"] as? [String: Any] else {
                return .failure(.badRequest("an fcmv1 notification's body must be {\"message\":{…}}"))
            }
            plan.fcmMessage = Self.messageJSON(message)
        case .windows:
            if Self.header("X-WNS-Type", in: plan.headers) == nil {
                guard let type = Self.wnsType(of: body) else {
                    return .failure(.badRequest("X-WNS-Type is required for a windows notification that is not toast, tile or badge XML"))
                }
                plan.headers.append(.init("X-WNS-Type", type))
            }
        case .browser:
            if let endpoint = request.directHandle {
                guard BrowserKeys.isEndpoint(endpoint) else { return .failure(.badRequest(BrowserKeys.endpointRequirement)) }
                let p256dh = Self.header("P256DH", in: request.headers) ?? ""
                guard let keys = BrowserKeys(p256dh: p256dh, auth: Self.header("Auth", in: request.headers) ?? "") else {
                    return .failure(.badRequest("a direct browser send needs the P256DH and Auth headers: \(BrowserKeys.requirement)"))
                }
                plan.directKeys = keys
            }
        }
        return .success(plan)
    }

    /// The push for one target (its registration, or none for a direct send).
    func native(for registration: HubRegistration?, platform: HubPlatform, handle: String, settings: NotificationHub.Settings) -> Result<NativePush, BuildFailure> {
        var body = self.body
        var headers = self.headers
        if let template = registration?.template {
            body = TemplateExpansion.expand(template.body, properties: properties)
            headers = template.headers
            if platform == .apple {
                if let expiry = template.expiry {
                    headers.append(.init("ServiceBusNotification-Apns-Expiry", TemplateExpansion.expand("\"\(expiry)\"", properties: properties).trimmingCharacters(in: CharacterSet(charactersIn: "\""))))
                }
                if let priority = template.priority { headers.append(.init("apns-priority", priority)) }
            }
        }
        let bearer = HubRegistration.Header("authorization", "bearer \(settings.providerToken)")
        switch platform {
        case .apple:
            var apns = headers.filter { $0.name.lowercased().hasPrefix("apns-") }
            if Self.header("apns-push-type", in: apns) == nil {
                guard let pushType = applePushType ?? Self.object(body).map(Self.apnsPushType) else {
                    return .failure(BuildFailure(reason: "the template did not produce a JSON object"))
                }
                apns.append(.init("apns-push-type", pushType))
            }
            if Self.header("apns-topic", in: apns) == nil { apns.append(.init("apns-topic", settings.apnsTopic)) }
            if let priority = Self.header("X-Apns-Priority", in: headers), Self.header("apns-priority", in: apns) == nil {
                apns.append(.init("apns-priority", priority))
            }
            if let expiry = Self.header("ServiceBusNotification-Apns-Expiry", in: headers), Self.header("apns-expiration", in: apns) == nil {
                guard let date = Self.date(expiry) else { return .failure(BuildFailure(reason: "ServiceBusNotification-Apns-Expiry is not a W3C date")) }
                apns.append(.init("apns-expiration", String(Int64(date.timeIntervalSince1970))))
            }
            return .success(NativePush(platform: .apple, handle: handle, headers: apns + [bearer, .init("content-type", "application/json")], body: body))
        case .fcmv1, .gcm:
            var message = registration?.template == nil ? fcmMessage : nil
            if message == nil, let object = Self.object(body) {
                message = Self.messageJSON(platform == .fcmv1 ? (object["message"] as? [String: Any] ?? [:]) : Self.v1Message(legacy: object))
            }
            guard let message else { return .failure(BuildFailure(reason: "the template did not produce a JSON object")) }
            // The token goes first in the message object.
            let token = "\"token\":\(TemplateExpansion.jsonString(handle))"
            let spliced = message == "{}" ? "{\(token)}" : "{\(token)," + message.dropFirst()
            return .success(
                NativePush(platform: platform, handle: handle, headers: [bearer, .init("content-type", "application/json")], body: "{\"message\":\(spliced)}")
            )
        case .windows:
            var wns = headers.filter { $0.name.lowercased().hasPrefix("x-wns-") }
            if Self.header("X-WNS-Type", in: wns) == nil, let type = Self.wnsType(of: body) { wns.append(.init("X-WNS-Type", type)) }
            let raw = Self.header("X-WNS-Type", in: wns) == "wns/raw"
            return .success(
                NativePush(platform: .windows, handle: handle, headers: wns + [bearer, .init("content-type", raw ? "application/octet-stream" : "text/xml")], body: body)
            )
        case .browser:
            return browserPush(body, keys: registration?.browserKeys ?? directKeys, endpoint: handle, settings: settings)
        }
    }

    /// Encrypted for the subscription's keys (RFC 8291, aes128gcm) and signed with the hub's
    /// browser credential (RFC 8292), as the service sends it to the browser's push service.
    private func browserPush(_ body: String, keys: BrowserKeys?, endpoint: String, settings: NotificationHub.Settings) -> Result<NativePush, BuildFailure> {
        guard let keys, let recipient = try? WebPushRecipient(p256dh: keys.p256dh, auth: keys.auth) else {
            return .failure(BuildFailure(reason: "the browser registration has no usable P256DH and Auth"))
        }
        // Checked where it entered (a registration, an installation, a direct send's header).
        guard let url = URL(string: endpoint) else { return .failure(BuildFailure(reason: BrowserKeys.endpointRequirement)) }
        let plaintext = Data(body.utf8)
        guard plaintext.count <= Self.payloadLimit(.browser) else {
            return .failure(BuildFailure(reason: "the browser payload is \(plaintext.count) bytes, over \(Self.payloadLimit(.browser))"))
        }
        let sealed: WebPushCiphertext
        let authorization: String
        do {
            sealed = try WebPushEncryption.encrypt(plaintext, for: recipient)
            authorization = try settings.browserCredential.authorization(for: url, now: Int64(Date().timeIntervalSince1970))
        } catch {
            return .failure(BuildFailure(reason: "the browser push could not be made: \(error)"))
        }
        var headers: [HubRegistration.Header] = [
            .init("authorization", authorization), .init("ttl", String(Self.browserTTL)), .init("content-encoding", sealed.encoding.rawValue),
            .init("content-type", "application/octet-stream"),
        ]
        if let urgency = Self.header("Urgency", in: self.headers) { headers.append(.init("urgency", urgency)) }
        if let topic = Self.header("Topic", in: self.headers) { headers.append(.init("topic", topic)) }
        var push = NativePush(platform: .browser, handle: endpoint, headers: headers, body: "")
        push.payload = sealed.body
        return .success(push)
    }


    // MARK: Helpers

    /// An FCM v1 message as JSON, without the addressing the hub sets (`token`, `topic`, `condition`).
    static func messageJSON(_ message: [String: Any]) -> String? {
        var message = message
        message["token"] = nil
        message["topic"] = nil
        message["condition"] = nil
        return (try? JSONSerialization.data(withJSONObject: message)).map { String(decoding: $0, as: UTF8.self) }
    }

    static func object(_ text: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }

    static func header(_ name: String, in headers: [HubRegistration.Header]) -> String? {
        headers.last { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// `background` for a silent push (content-available with nothing to show), else `alert`.
    static func apnsPushType(_ payload: [String: Any]) -> String {
        guard let aps = payload["aps"] as? [String: Any] else { return "alert" }
        let visible = aps["alert"] != nil || aps["badge"] != nil || (aps["sound"] as? String).map { !$0.isEmpty } == true
        return !visible && (aps["content-available"] as? Int) == 1 ? "background" : "alert"
    }

    /// The toast, tile or badge type of a WNS XML payload, from its root element.
    static func wnsType(of body: String) -> String? {
        let trimmed = body.drop { $0.isWhitespace }
        for root in ["toast", "tile", "badge"] where trimmed.hasPrefix("<\(root)") {
            let after = trimmed.dropFirst(root.count + 1).first
            if after == ">" || after == " " || after == "/" || after == "\n" { return "wns/\(root)" }
        }
        return nil
    }

    /// A legacy FCM payload carried as an FCM v1 message: `data` (values as strings),
    /// `notification`, and `time_to_live`/`priority`/`collapse_key` as `android` options.
    static func v1Message(legacy: [String: Any]) -> [String: Any] {
        var message: [String: Any] = [:]
        if let data = legacy["data"] as? [String: Any] {
            message["data"] = data.mapValues { value -> String in
                if let text = value as? String { return text }
                if let encoded = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]) {
                    return String(decoding: encoded, as: UTF8.self)
                }
                return "\(value)"
            }
        }
        if let notification = legacy["notification"] as? [String: Any] {
            var converted: [String: String] = [:]
            for key in ["title", "body", "image"] { if let value = notification[key] as? String { converted[key] = value } }
            message["notification"] = converted
        }
        var android: [String: Any] = [:]
        if let ttl = legacy["time_to_live"] as? Int, ttl >= 0 { android["ttl"] = "\(ttl)s" }
        if let priority = legacy["priority"] as? String { android["priority"] = priority.lowercased() == "high" ? "HIGH" : "NORMAL" }
        if let collapse = legacy["collapse_key"] as? String { android["collapse_key"] = collapse }
        if !android.isEmpty { message["android"] = android }
        return message
    }

    /// A W3C date-time (`1997-07-16T19:20+01:00`, with or without seconds and fraction).
    static func date(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        for format in ["yyyy-MM-dd'T'HH:mm:ss.SSSSSSSXXXXX", "yyyy-MM-dd'T'HH:mm:ss.SSSXXXXX", "yyyy-MM-dd'T'HH:mm:ssXXXXX", "yyyy-MM-dd'T'HH:mmXXXXX", "yyyy-MM-dd'T'HH:mm:ss", "MM/dd/yyyy HH:mm:ss"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = format
            if let date = formatter.date(from: trimmed) { return date }
        }
        return nil
    }
}
