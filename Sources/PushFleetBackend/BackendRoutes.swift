import Foundation
import HTTPTypes
import HummingbirdCore
import NIOCore
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire

/// The reference backend's fetch of a stored notification (`GET /api/notifications/{id}`) and a
/// device's registration (`POST /api/register`, `PUT /api/register/{id}`), answered on the event
/// loop that read them (``EventLoopRoutes``), and its secure send, answered when its pushes are
/// (``ReferenceBackend/secureSendLater(head:body:on:)``): a device fetches once per secure or rich
/// push and registers twice as it arrives, and the router's task, trie and hops to Swift's pool
/// cost more than the store's work. Taken only when nothing needs waiting or recording: the
/// in-memory store open, no injected latency, no spans recorded, a caller known at once (Basic,
/// or a token verified before), the request one the router would accept. Anything else, an
/// unknown id included, goes to the router, which answers it as before.
struct BackendRoutes: EventLoopResponder {
    let backend: ReferenceBackend

    static let prefix = "/api/notifications/"
    /// A fetch has no body; one that brings a few bytes anyway is read and ignored, as the
    /// router does.
    static let bodyLimit = 1024

    func route(for head: HTTPRequest) -> EventLoopRoute? {
        if Self.isSecureSend(head) {
            return EventLoopRoute(kind: 1, parameter: "", bodyLimit: backend.configuration.limits.maxBodyBytes)
        }
        if Self.isRegistrationCreate(head) {
            return EventLoopRoute(kind: 2, parameter: "", bodyLimit: Self.bodyLimit)
        }
        if let id = Self.registrationUpdateID(head) {
            return EventLoopRoute(kind: 3, parameter: id, bodyLimit: backend.configuration.limits.maxBodyBytes)
        }
        guard head.method == .get, let path = head.path, path.hasPrefix(Self.prefix) else { return nil }
        let id = path.dropFirst(Self.prefix.count)
        guard !id.isEmpty, id.utf8.allSatisfy(Self.isPlain) else { return nil }
        return EventLoopRoute(kind: 0, parameter: id, bodyLimit: Self.bodyLimit)
    }

    func respond(_ route: EventLoopRoute, head: HTTPRequest, body: ByteBuffer?, channel: any Channel) -> CompleteResponse? {
        guard let body else { return nil }
        let authorization = head.headerFields.value(of: .authorization)
        switch route.kind {
        case 0: return backend.fetchAtOnce(id: String(route.parameter), authorization: authorization)
        case 2: return backend.createRegistrationAtOnce(target: head.path ?? "", authorization: authorization)
        case 3: return backend.updateRegistrationAtOnce(id: String(route.parameter), body: body, authorization: authorization)
        default: return nil
        }
    }

    func respondLater(_ route: EventLoopRoute, head: HTTPRequest, body: ByteBuffer?, channel: any Channel) -> EventLoopFuture<CompleteResponse>? {
        guard route.kind == 1, let body else { return nil }
        return backend.secureSendLater(head: head, body: body, on: channel.eventLoop)
    }

    /// A POST to `path` exactly, with or without a query.
    static func isPost(_ head: HTTPRequest, to path: String) -> Bool {
        guard head.method == .post, let target = head.path, target.hasPrefix(path) else { return false }
        let rest = target.utf8.dropFirst(path.utf8.count)
        return rest.isEmpty || rest.first == UInt8(ascii: "?")
    }

    /// A byte of an id the router would take as it is: no slash, query, fragment or escape.
    static func isPlain(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "/") && byte != UInt8(ascii: "?") && byte != UInt8(ascii: "%")
            && byte != UInt8(ascii: "#")
    }
}

extension ReferenceBackend {
    /// A query member's value, as the router's `URI(_:).queryParameters` reads it (the first one;
    /// a member without `=` has an empty value), read from the bytes when the target has no
    /// escape or fragment, else by `URI`.
    static func queryValue(_ name: String, inTarget target: String) -> Substring? {
        let utf8 = target.utf8
        guard let mark = utf8.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        let query = utf8[utf8.index(after: mark)...]
        guard !query.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "#") }) else {
            return URI(target).queryParameters[Substring(name)]
        }
        // One pass over the bytes, no member array: this runs for every secure send.
        var start = query.startIndex
        while start < query.endIndex {
            let end = query[start...].firstIndex(of: UInt8(ascii: "&")) ?? query.endIndex
            let member = query[start..<end]
            if let equals = member.firstIndex(of: UInt8(ascii: "=")) {
                if member[..<equals].elementsEqual(name.utf8) { return Substring(target[utf8.index(after: equals)..<end]) }
            } else if !member.isEmpty, member.elementsEqual(name.utf8) {
                return ""
            }
            start = end == query.endIndex ? end : utf8.index(after: end)
        }
        return nil
    }

    /// The fetch's answer when it needs no waiting, else nil (the router's route answers).
    func fetchAtOnce(id: String, authorization: String?) -> CompleteResponse? {
        // A backend recording spans answers on the router, which records the fetch's.
        guard !configuration.faults.isActive, configuration.spans == nil, let store = storeHandle.memory, let user = knownCaller(authorization)
        else { return nil }
        guard let notification = store.readNotification(id: id, reader: user, now: configuration.clock()) else { return nil }
        storeSucceeded(writes: true)
        return Self.fetchAnswer(notification)
    }

    /// What a fetch of a stored notification answers, on either path.
    static func fetchAnswer(_ notification: NotificationStore.Notification) -> CompleteResponse {
        switch notification.content {
        case .secure(let payload):
            let secure = SecureNotification(id: notification.id, payload: payload, read: notification.read)
            return .bytes(secure.jsonBytes.bytes, contentType: "application/json")
        case .rich(_, _, let contentType, let data):
            return .bytes(data, contentType: contentType)
        }
    }
}
