import Foundation
public import PushFleetWebPush

extension NotificationHub {
    /// A hub's settings: its namespace and name, the namespace's keys, its limits and its fan-out.
    public struct Settings: Sendable {
        /// `{namespace}.servicebus.windows.net`.
        public var namespace: String
        public var hubName: String
        /// The namespace's authorization rules (keys and their rights).
        public var rules: [SharedAccessSignature.Rule]
        /// The hub's registration time to live; nil for the service's "never".
        public var registrationTTL: Duration?
        /// `apns-topic` for Apple pushes (the app the hub's APNs credential is for).
        public var apnsTopic: String
        /// Sent as `authorization: bearer …` to the push services (the hub's credentials).
        public var providerToken: String
        public var limits: HubStore.Limits
        /// A send's body; larger is 413, as documented.
        public var maxMessageBytes: Int
        /// Attempts per push when the push service throttles, the first included.
        public var maxAttempts: Int
        /// The first retry's wait at most; each retry's doubles, up to 2 s or this, the larger.
        public var backoff: Duration
        /// Pushes of one send in flight at once.
        public var fanOutConcurrency: Int
        /// The browser (Web Push) credential: the VAPID key pair and subject the hub signs with;
        /// browsers subscribe with its public half.
        public var browserCredential: VAPIDSigner

        public static let fullAccessKeyName = "DefaultFullSharedAccessSignature"
        public static let listenKeyName = "DefaultListenSharedAccessSignature"

        public init(
            namespace: String = "pushfleet",
            hubName: String = "pushfleet",
            fullAccessKey: String = Settings.randomKey(),
            listenKey: String = Settings.randomKey(),
            registrationTTL: Duration? = nil,
            apnsTopic: String = "com.pushfleet.app",
            providerToken: String = "pushfleet-hub-credential",
            limits: HubStore.Limits = .init(),
            maxMessageBytes: Int = 64 * 1024,
            maxAttempts: Int = 4,
            backoff: Duration = .milliseconds(20),
            fanOutConcurrency: Int = 64,
            browserCredential: VAPIDSigner = VAPIDSigner(subject: "mailto:hub@pushfleet.invalid")
        ) {
            self.browserCredential = browserCredential
            self.namespace = namespace
            self.hubName = hubName
            self.rules = [
                .init(keyName: Self.fullAccessKeyName, key: fullAccessKey, rights: [.listen, .send, .manage]),
                .init(keyName: Self.listenKeyName, key: listenKey, rights: [.listen]),
            ]
            self.registrationTTL = registrationTTL
            self.apnsTopic = apnsTopic
            self.providerToken = providerToken
            self.limits = limits
            self.maxMessageBytes = maxMessageBytes
            self.maxAttempts = maxAttempts
            self.backoff = backoff
            self.fanOutConcurrency = fanOutConcurrency
        }

        /// 32 random bytes, base64, as the portal makes keys.
        public static func randomKey() -> String {
            var generator = SystemRandomNumberGenerator()
            return Data((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64EncodedString()
        }

        public var namespaceHost: String { "\(namespace).servicebus.windows.net".lowercased() }

        /// Names a hub may not take: the push service's own first path segments.
        public static let reservedNames: Set<String> = ["3", "v1", "wns", "device", "gateway", "admin", "health", "oauth2", "token", "accesstoken.srf"]

        /// Problems with the settings, empty when they are usable.
        public func problems() -> [String] {
            var problems: [String] = []
            let label = #"^[a-z][a-z0-9-]{4,48}[a-z0-9]$"#
            if namespace.range(of: label, options: [.regularExpression, .caseInsensitive]) == nil {
                problems.append("the hub namespace must be 6-50 letters, digits or hyphens, starting with a letter")
            }
            if hubName.isEmpty || hubName.count > 260 || hubName.contains("/") || Self.reservedNames.contains(hubName.lowercased()) {
                problems.append("the hub name must be 1-260 characters without '/', and not one of \(Self.reservedNames.sorted())")
            }
            for rule in rules where rule.key.utf8.count < 16 || rule.key.utf8.count > 256 {
                problems.append("the key of \(rule.keyName) must be 16-256 characters")
            }
            if !(1...10).contains(maxAttempts) { problems.append("attempts per push must be 1-10") }
            return problems
        }

        /// The connection string of a rule, for `endpoint` (`sb://{namespace}.servicebus.windows.net/`
        /// by default, or the plain-HTTP base URL of this process).
        public func connectionString(keyName: String = Settings.fullAccessKeyName, endpoint: String? = nil) -> HubConnectionString {
            let key = rules.first { $0.keyName == keyName }?.key ?? ""
            return HubConnectionString(
                endpoint: endpoint ?? "sb://\(namespaceHost)/", keyName: keyName, key: key, entityPath: hubName
            )
        }
    }
}
