import Crypto
import Foundation
import PushFleetCore
import Synchronization

/// A Notification Hubs connection string:
/// `Endpoint=sb://{namespace}.servicebus.windows.net/;SharedAccessKeyName=…;SharedAccessKey=…[;EntityPath=hub]`.
public struct HubConnectionString: Sendable, Equatable, CustomStringConvertible {
    /// As written: `sb://…/`, or `http(s)://host:port/` for a hub reached without TLS or a hosts entry.
    public var endpoint: String
    public var keyName: String
    public var key: String
    public var entityPath: String?

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    public init(endpoint: String, keyName: String, key: String, entityPath: String? = nil) {
        self.endpoint = endpoint
        self.keyName = keyName
        self.key = key
        self.entityPath = entityPath
    }

    public init(parsing text: String) throws(ParseError) {
        var fields: [String: String] = [:]
        for part in text.split(separator: ";") where !part.trimmingCharacters(in: .whitespaces).isEmpty {
            guard let equals = part.firstIndex(of: "=") else {
                throw ParseError(description: "'\(part)' is not KEY=VALUE")
            }
            fields[part[..<equals].trimmingCharacters(in: .whitespaces).lowercased()] = String(part[part.index(after: equals)...])
                .trimmingCharacters(in: .whitespaces)
        }
        guard let endpoint = fields["endpoint"], let url = URL(string: endpoint), ["sb", "http", "https"].contains(url.scheme ?? ""),
            url.host != nil
        else { throw ParseError(description: "Endpoint must be sb://, http:// or https:// with a host") }
        guard let keyName = fields["sharedaccesskeyname"], !keyName.isEmpty, keyName.utf8.count <= 256 else {
            throw ParseError(description: "SharedAccessKeyName is missing (at most 256 characters)")
        }
        guard let key = fields["sharedaccesskey"], !key.isEmpty, key.utf8.count <= 256 else {
            throw ParseError(description: "SharedAccessKey is missing (at most 256 characters)")
        }
        self.init(endpoint: endpoint, keyName: keyName, key: key, entityPath: fields["entitypath"].flatMap { $0.isEmpty ? nil : $0 })
    }

    public var description: String {
        "Endpoint=\(endpoint);SharedAccessKeyName=\(keyName);SharedAccessKey=\(key)" + (entityPath.map { ";EntityPath=\($0)" } ?? "")
    }

    /// The string as the portal shows a hub's access policy: Endpoint, SharedAccessKeyName and
    /// SharedAccessKey only; clients take the hub's name apart (and some refuse a fourth part).
    public var withoutEntityPath: HubConnectionString {
        HubConnectionString(endpoint: endpoint, keyName: keyName, key: key)
    }

    /// The base URL requests go to: `sb://` is the service's https; http(s) stay as written.
    public var baseURL: String {
        var base = endpoint
        if base.hasPrefix("sb://") { base = "https://" + base.dropFirst("sb://".count) }
        while base.hasSuffix("/") { base.removeLast() }
        return base
    }
}

/// Shared Access Signature tokens: `SharedAccessSignature sr=…&sig=…&se=…&skn=…`, where `sig` is
/// the base64 HMAC-SHA256, keyed with the key's UTF-8 bytes, of the URL-encoded lower-case
/// resource URI, a line feed and the expiry in seconds since the epoch.
public enum SharedAccessSignature {
    /// What a verified token allows.
    public enum Right: String, Sendable, Hashable, CaseIterable {
        case listen = "Listen"
        case send = "Send"
        case manage = "Manage"
    }

    /// A named key and the rights it grants, as an authorization rule of the namespace holds it.
    public struct Rule: Sendable, Equatable {
        public var keyName: String
        public var key: String
        public var rights: Set<Right>

        public init(keyName: String, key: String, rights: Set<Right>) {
            self.keyName = keyName
            self.key = key
            self.rights = rights
        }
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case missing
        case malformed(String)
        case unknownKey(String)
        case badSignature
        case expired
        case wrongAudience(String)

        public var description: String {
            switch self {
            case .missing: "MissingToken: the request has no Authorization header"
            case .malformed(let why): "MalformedToken: \(why)"
            case .unknownKey(let name): "InvalidSignature: no key named '\(name)'"
            case .badSignature: "InvalidSignature: the token's signature does not match"
            case .expired: "ExpiredToken: the token has expired"
            case .wrongAudience(let audience): "InvalidAudience: the token is for '\(audience)', not this resource"
            }
        }
    }

    /// A token for `resource`, valid until `expiry` (seconds since the epoch). `resource` is
    /// lower-cased and URL-encoded as the SDKs do.
    public static func token(resource: String, keyName: String, key: String, expiry: Int64) -> String {
        let audience = formEncode(resource.lowercased())
        let signature = sign("\(audience)\n\(expiry)", key: key)
        return "SharedAccessSignature sr=\(audience)&sig=\(formEncode(signature))&se=\(expiry)&skn=\(formEncode(keyName))"
    }

    /// Checks a token against the rules and the resource being requested.
    /// - Parameters:
    ///   - header: the `Authorization` header's value.
    ///   - resource: host and path of the request, lower-cased, with no scheme, port or query
    ///     (`ns.servicebus.windows.net/hub/messages`).
    ///   - hosts: host names the token's audience may name (the request's, and the namespace's).
    ///   - now: seconds since the epoch.
    /// - Returns: the rights of the key that signed it.
    public static func verify(
        _ header: String?,
        rules: [Rule],
        resource: String,
        hosts: Set<String>,
        now: Int64
    ) -> Result<Set<Right>, Failure> {
        guard let header, !header.isEmpty else { return .failure(.missing) }
        let prefix = "SharedAccessSignature "
        guard header.utf8.count <= 4096, header.hasPrefix(prefix) else {
            return .failure(.malformed("expected 'SharedAccessSignature sr=…&sig=…&se=…&skn=…'"))
        }
        var raw: [String: Substring] = [:]
        for field in header.dropFirst(prefix.count).split(separator: "&") {
            guard let equals = field.firstIndex(of: "=") else { return .failure(.malformed("'\(field)' is not KEY=VALUE")) }
            raw[String(field[..<equals])] = field[field.index(after: equals)...]
        }
        guard let audience = raw["sr"], let signature = raw["sig"], let expiryText = raw["se"], let keyNameText = raw["skn"] else {
            return .failure(.malformed("sr, sig, se and skn are all required"))
        }
        guard let expiry = Int64(expiryText), expiry >= 0 else { return .failure(.malformed("se must be seconds since the epoch")) }
        let keyName = percentDecode(keyNameText) ?? String(keyNameText)
        guard let rule = rules.first(where: { $0.keyName == keyName }) else { return .failure(.unknownKey(keyName)) }
        // The signed text is the audience exactly as the client encoded it.
        let expected = Data(base64Encoded: sign("\(audience)\n\(expiryText)", key: rule.key)) ?? Data()
        guard let decoded = percentDecode(signature), let given = Data(base64Encoded: decoded),
            given.count == expected.count, zip(given, expected).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0
        else { return .failure(.badSignature) }
        guard expiry > now else { return .failure(.expired) }
        guard let decodedAudience = percentDecode(audience), covers(audience: decodedAudience, resource: resource, hosts: hosts) else {
            return .failure(.wrongAudience(percentDecode(audience) ?? String(audience)))
        }
        return .success(rule.rights)
    }

    /// Verified tokens by their header text, so a client reusing a token (as the SDKs do for
    /// minutes) costs no HMAC per request; expiry and audience are still checked every time.
    public final class VerifiedCache: Sendable {
        struct Entry {
            var keyName: String
            /// The key it was verified with: a rule whose key changed verifies it anew.
            var key = ""
            var expiry: Int64
            var audience: String
        }

        private let entries = Mutex<[String: Entry]>([:])
        private let capacity: Int

        public init(capacity: Int = 4096) {
            self.capacity = capacity
        }

        /// ``verify(_:rules:resource:hosts:now:)``, remembering what was verified.
        public func verify(
            _ header: String?, rules: [Rule], resource: String, hosts: Set<String>, now: Int64
        ) -> Result<Set<Right>, Failure> {
            guard let header else { return .failure(.missing) }
            if let entry = entries.withLock({ $0[header] }), let rule = rules.first(where: { $0.keyName == entry.keyName && $0.key == entry.key }) {
                guard entry.expiry > now else { return .failure(.expired) }
                guard covers(audience: entry.audience, resource: resource, hosts: hosts) else { return .failure(.wrongAudience(entry.audience)) }
                return .success(rule.rights)
            }
            let result = SharedAccessSignature.verify(header, rules: rules, resource: resource, hosts: hosts, now: now)
            if case .success = result, var entry = Self.entry(header), let rule = rules.first(where: { $0.keyName == entry.keyName }) {
                entry.key = rule.key
                entries.withLock {
                    if $0.count >= capacity { $0.removeAll() }
                    $0[header] = entry
                }
            }
            return result
        }

        private static func entry(_ header: String) -> Entry? {
            var fields: [Substring: Substring] = [:]
            for field in header.dropFirst("SharedAccessSignature ".count).split(separator: "&") {
                guard let equals = field.firstIndex(of: "=") else { return nil }
                fields[field[..<equals]] = field[field.index(after: equals)...]
            }
            guard let audience = fields["sr"].flatMap(percentDecode), let expiry = fields["se"].flatMap({ Int64($0) }),
                let keyName = fields["skn"].flatMap(percentDecode)
            else { return nil }
            return Entry(keyName: keyName, expiry: expiry, audience: audience)
        }
    }

    /// Whether the audience (any scheme, any port) is the resource or a path prefix of it.
    static func covers(audience: String, resource: String, hosts: Set<String>) -> Bool {
        var text = audience.lowercased()
        if let scheme = text.range(of: "://") { text = String(text[scheme.upperBound...]) }
        if let query = text.firstIndex(of: "?") { text = String(text[..<query]) }
        let slash = text.firstIndex(of: "/") ?? text.endIndex
        var host = String(text[..<slash])
        if let colon = host.lastIndex(of: ":") { host = String(host[..<colon]) }
        guard hosts.contains(host) else { return false }
        let audiencePath = text[slash...].split(separator: "/")
        let resourcePath = resource.split(separator: "/").dropFirst()
        return audiencePath.count <= resourcePath.count && zip(audiencePath, resourcePath).allSatisfy { $0 == $1 }
    }

    static func sign(_ text: String, key: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data(text.utf8), using: SymmetricKey(data: Data(key.utf8)))
        return Data(mac).base64EncodedString()
    }

    /// `application/x-www-form-urlencoded` escaping, lower-case hex as .NET's `HttpUtility.UrlEncode` writes it.
    public static func formEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "!"), UInt8(ascii: "*"), UInt8(ascii: "("),
                UInt8(ascii: ")"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "):
                out += "+"
            default:
                out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
            }
        }
        return out
    }

    /// `%XX` decoding; `+` stays `+` (a base64 signature may hold one unescaped).
    static func percentDecode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Hex.value), let low = iterator.next().flatMap(Hex.value) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

}
