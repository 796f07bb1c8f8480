/// How a description's virtual browsers subscribe (`receive.webpush`): the applicationServerKey
/// they bind their subscriptions to, and which push services' endpoint forms they get.
public struct WebPushReceive: Sendable, Equatable {
    /// Where the backend's VAPID public key comes from, as a page's script has it.
    public enum KeySource: Sendable, Equatable {
        /// Subscriptions bound to no key: any VAPID key, or none, is taken.
        case none
        /// The key itself (base64url of the uncompressed P-256 point, 65 bytes).
        case literal(String)
        /// Read once per run from the backend: `GET path`, the key at `location` in the answer.
        case fetch(path: String, location: ValueLocation)
    }

    /// The push services whose endpoint forms browsers get, in turn by device.
    public enum Service: String, Sendable, Equatable, CaseIterable {
        case fcm, mozilla, windows, apple
    }

    /// Where endpoints point: `local`, the push service as the fleet reaches it
    /// (`http://127.0.0.1:…/fcm/send/…`); `public`, the real service's host over https
    /// (`https://fcm.googleapis.com/fcm/send/…`), for backends that take only https endpoints
    /// and reach the push service's TLS port by hosts entries.
    public enum Endpoints: String, Sendable, Equatable, CaseIterable {
        case local, `public`
    }

    public var applicationServerKey: KeySource
    public var services: [Service]
    public var endpoints: Endpoints

    public init(applicationServerKey: KeySource = .none, services: [Service] = Service.allCases, endpoints: Endpoints = .local) {
        self.applicationServerKey = applicationServerKey
        self.services = services
        self.endpoints = endpoints
    }

    /// The service of the browser at `index` in the plan.
    public func service(device index: Int) -> Service {
        services.isEmpty ? .fcm : services[index % services.count]
    }

    /// Whether `text` is a usable applicationServerKey: base64url of 65 bytes starting 0x04 (the
    /// point itself is checked by the push service, which refuses one off the curve).
    public static func isKeyShaped(_ text: String) -> Bool {
        guard let bytes = Base64URL.decode(text) else { return false }
        return bytes.count == 65 && bytes.first == 0x04
    }
}
