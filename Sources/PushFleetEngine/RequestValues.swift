import PushFleetClients
import PushFleetCore
import Synchronization

/// The values one request's templates are filled from.
struct RequestValues: TemplateValues {
    var user: Int
    var userName: String
    var password: String
    var run: String
    var users: UserValues
    var device: DeviceValues? = nil
    var deviceSlots: [APIValue?] = []
    var locals: [APIValue?] = []
    var platform: String? = nil
    var to: String? = nil
    var message: String? = nil
    var image: String? = nil
    var id: String? = nil
    var victim: String? = nil
    /// The trace its request joins (a send's); nil: the request starts a trace of its own.
    var trace: TraceIdentity? = nil

    /// What a device contributes: its token as the backend sees it and its platform's name; its
    /// id is worked out from the token when a template asks (kept per device, it would cost a
    /// string per device for a value most descriptions never use).
    struct DeviceValues {
        var pushToken: String
        var platform: String
        /// A browser's subscription (nil for the other platforms: its variables are unset).
        var subscription: BrowserSubscription? = nil

        var id: String {
            let hex = String(stableHash(pushToken), radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }
    }

    func value(of ref: VariableRef) -> APIValue? {
        switch ref {
        case .builtin(let builtin):
            let text: String? =
                switch builtin {
                case .user: userName
                case .password: password
                case .basicAuth: BackendClient.basic(userName, password: password)
                case .run: run
                case .devicePushToken: device?.pushToken
                case .devicePlatform: device?.platform
                case .deviceID: device?.id
                case .deviceEndpoint: device?.subscription?.endpoint
                case .deviceP256dh: device?.subscription?.p256dh
                case .deviceAuth: device?.subscription?.auth
                case .platform: platform
                case .to: to
                case .message: message
                case .image: image
                case .imageType: image == nil ? nil : "image/png"
                case .id: id
                case .victim: victim
                }
            return text.map { .text($0) }
        case .stored(.user, let slot): return users.value(user: user, slot: slot)
        case .stored(.device, let slot): return slot < deviceSlots.count ? deviceSlots[slot] : nil
        case .stored(.local, let slot): return slot < locals.count ? locals[slot] : nil
        }
    }
}

/// Values kept per user (what login extracted: a token), shared by the user's devices and senders;
/// and, for the run as a whole, which missing values it has already described.
final class UserValues: Sendable {
    private let slots: Int
    private let values: Mutex<[[APIValue?]]>
    private let described = Mutex<Set<String>>([])

    /// True the first time `key` is asked about in the run: what is described once.
    func firstTime(_ key: String) -> Bool {
        described.withLock { $0.insert(key).inserted }
    }

    init(users: Int, slots: Int) {
        self.slots = slots
        values = Mutex(slots == 0 ? [] : Array(repeating: Array(repeating: nil, count: slots), count: users))
    }

    func value(user: Int, slot: Int) -> APIValue? {
        guard slots > 0 else { return nil }
        return values.withLock { $0[user][slot] }
    }

    func store(_ value: APIValue?, user: Int, slot: Int) {
        guard slots > 0 else { return }
        values.withLock { $0[user][slot] = value }
    }

    func hasAll(user: Int) -> Bool {
        guard slots > 0 else { return true }
        return values.withLock { $0[user].allSatisfy { $0 != nil } }
    }
}
