import Foundation
import HTTPTypes
import NIOCore
import PushFleetServerSupport
import PushFleetWire

extension BackendRoutes {
    static let registerPath = "/api/register"

    /// `POST /api/register`, with or without a query.
    static func isRegistrationCreate(_ head: HTTPRequest) -> Bool {
        isPost(head, to: registerPath)
    }

    /// The id of `PUT /api/register/{id}` when it is one plain path component, as the router
    /// would take it.
    static func registrationUpdateID(_ head: HTTPRequest) -> Substring? {
        guard head.method == .put, let path = head.path, path.hasPrefix(registerPath + "/") else { return nil }
        let id = path.dropFirst(registerPath.count + 1)
        guard !id.isEmpty, id.utf8.allSatisfy(isPlain) else { return nil }
        return id
    }
}

extension ReferenceBackend {
    /// The in-memory store, when a registration may be answered on the loop: nothing injected to
    /// wait on, no spans to record, no hub to call.
    private var registersAtOnce: MemoryStore? {
        guard !configuration.faults.isActive, configuration.spans == nil, hubSender == nil else { return nil }
        return storeHandle.memory
    }

    /// `POST /api/register[?handle=…]` as the router's route answers it, when the caller is known
    /// at once and the handle is one it accepts; nil leaves the request to the router (which
    /// refuses what is refused, with its own words, and counts a store that fails).
    func createRegistrationAtOnce(target: String, authorization: String?) -> CompleteResponse? {
        guard let store = registersAtOnce, let user = knownCaller(authorization) else { return nil }
        let handle = Self.queryValue("handle", inTarget: target).map(String.init)
        if let handle, (try? validateHandle(handle)) == nil { return nil }
        let now = configuration.clock()
        sweepIfDue(now: now, store: store)
        guard let id = try? store.createRegistration(owner: user, handle: handle, now: now) else { return nil }
        storeSucceeded(writes: true)
        // The seed answers the id as a JSON string.
        return .json(id)
    }

    /// `PUT /api/register/{id}` as the router's route answers it, when the caller is known at
    /// once, the body is a registration the router accepts (a Web Push subscription, parsed there,
    /// is left to it) and the update takes; nil leaves the request to the router. An update that
    /// does not take changes nothing, so the router, trying it again, answers it as before.
    func updateRegistrationAtOnce(id: String, body: ByteBuffer, authorization: String?) -> CompleteResponse? {
        // The route's body limit is the router's: a longer body never comes here.
        guard let store = registersAtOnce, let user = knownCaller(authorization),
            let update = try? ServerJSON.decoder.decode(DeviceRegistration.self, from: Data(body.readableBytesView)),
            let platform = Platform(name: update.platform), platform != .webpush,
            (try? validateHandle(update.handle)) != nil,
            let tags = try? validatedTags(update.tags ?? [], caller: user)
        else { return nil }
        let result = store.updateRegistration(
            id: id, owner: user, platform: platform, handle: update.handle, tags: tags, now: configuration.clock()
        )
        guard result == .updated else { return nil }
        storeSucceeded(writes: true)
        return .empty()
    }
}
