import Foundation
import Hummingbird
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire

extension ReferenceBackend {
    /// A 1×1 PNG: the seed's rich push sends a server-side image; this is ours.
    static let defaultRichImage = Data(
        base64Encoded: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )!

    func addNotificationRoutes(to api: RouterGroup<BasicRequestContext>) {
        api.post("notifications") { request, _ -> Response in
            let user = try await self.authenticate(request)
            let query = request.uri.queryParameters
            guard let pnsName = query["pns"], let platform = Platform(name: pnsName), Platform.pushable.contains(platform) else {
                throw HTTPError(.badRequest, message: "pns must be apns, fcm (or gcm), wns or webpush")
            }
            let recipient = try self.recipient(query["to_tag"], default: nil)
            let message = try await self.decodeBody(
                String.self, from: request, limit: self.configuration.limits.maxBodyBytes, what: "a JSON string (the message)"
            )
            guard message.utf8.count <= self.configuration.limits.maxMessageBytes else {
                throw HTTPError(.contentTooLarge, message: "message over \(self.configuration.limits.maxMessageBytes) bytes")
            }
            if platform == .wns { try Self.checkXMLCarries(user: user, message: message) }
            try Self.checkFits(message: message, platforms: [platform]) { NativeNotification.alert(platform: $0, from: user, message: message) }
            // The seed also put `from:<caller>` in the tag list, which the hub ORs: a send then
            // reached the sender's own devices too. Only the recipient's tag is addressed here.
            let outcome = try await self.send(to: recipient, platforms: [platform]) { platform in
                NativeNotification.alert(platform: platform, from: user, message: message)
            }
            return Self.response(for: outcome)
        }

        api.post("notifications/secure") { request, _ -> Response in
            let user = try await self.authenticate(request)
            let recipient = try self.recipient(request.uri.queryParameters["to_tag"], default: user)
            let payload = try await self.decodeBody(
                String.self, from: request, limit: self.configuration.limits.maxBodyBytes, what: "a JSON string (the payload)"
            )
            // Nothing is stored for a user with no device to tell: it could only be read by id.
            guard try await self.hasTargets(recipient) else { return Self.response(for: .noTarget) }
            let stored = try await self.storing {
                try await $0.createNotification(sender: user, recipient: recipient, content: .secure(payload: payload), now: self.configuration.clock())
            }
            var outcome = try await self.send(to: recipient, platforms: Platform.pushable) { platform in
                NativeNotification.secure(platform: platform, id: stored.id)
            }
            outcome.id = stored.id
            return Self.response(for: outcome)
        }

        api.post("notifications/rich") { request, _ -> Response in
            let user = try await self.authenticate(request)
            let recipient = try self.recipient(request.uri.queryParameters["to_tag"], default: user)
            let content = try await self.richContent(from: request)
            if case .rich(let message, let type, _, _) = content {
                // The id is a UUID; one of that length stands in for it.
                try Self.checkFits(message: message, platforms: Platform.pushable) {
                    NativeNotification.rich(platform: $0, id: UUIDText.random(), message: message, type: type)
                }
            }
            guard try await self.hasTargets(recipient) else { return Self.response(for: .noTarget) }
            let stored = try await self.storing {
                try await $0.createNotification(sender: user, recipient: recipient, content: content, now: self.configuration.clock())
            }
            guard case .rich(let message, let type, _, _) = content else { return .empty(status: .internalServerError) }
            var outcome = try await self.send(to: recipient, platforms: Platform.pushable) { platform in
                NativeNotification.rich(platform: platform, id: stored.id, message: message, type: type)
            }
            outcome.id = stored.id
            return Self.response(for: outcome)
        }

        api.get("notifications/:id") { request, context -> Response in
            let user = try await self.authenticate(request)
            let id = try context.parameters.require("id")
            guard let notification = try await self.storing({ try await $0.readNotification(id: id, reader: user, now: self.configuration.clock()) }) else {
                throw HTTPError(.notFound, message: "no notification \(id) for you")
            }
            return Self.fetchAnswer(notification).response
        }
    }

    /// The user a send addresses: `to_tag` is a user name; the tag it becomes must fit the limit.
    func recipient(_ toTag: Substring?, default fallback: String?) throws -> String {
        try recipientAndTag(toTag, default: fallback).user
    }

    /// ``recipient(_:default:)`` and the user's tag, made once.
    func recipientAndTag(_ toTag: Substring?, default fallback: String?) throws -> (user: String, tag: String) {
        guard let toTag, !toTag.isEmpty else {
            if let fallback { return (fallback, Self.userTag(fallback)) }
            throw HTTPError(.badRequest, message: "to_tag (the recipient's user name) is required")
        }
        let user = String(toTag)
        let tag = Self.userTag(user)
        try validateTag(tag)
        return (user, tag)
    }

    private func richContent(from request: Request) async throws -> NotificationStore.Content {
        let data = try await body(of: request, limit: configuration.limits.maxRichBodyBytes)
        if let message = try? ServerJSON.decoder.decode(String.self, from: data) {
            guard message.utf8.count <= configuration.limits.maxMessageBytes else {
                throw HTTPError(.contentTooLarge, message: "message over \(configuration.limits.maxMessageBytes) bytes")
            }
            return .rich(message: message, type: "img", contentType: "image/png", data: Self.defaultRichImage)
        }
        guard let rich = try? ServerJSON.decoder.decode(RichNotificationRequest.self, from: data) else {
            throw HTTPError(
                .badRequest, message: "body must be a JSON string (the message) or {\"message\":…,\"image\":<base64>,\"contentType\":…}"
            )
        }
        guard rich.message.utf8.count <= configuration.limits.maxMessageBytes else {
            throw HTTPError(.contentTooLarge, message: "message over \(configuration.limits.maxMessageBytes) bytes")
        }
        var image = Self.defaultRichImage
        if let encoded = rich.image {
            guard let decoded = Data(base64Encoded: encoded), !decoded.isEmpty else {
                throw HTTPError(.badRequest, message: "image must be non-empty base64")
            }
            image = decoded
        }
        let contentType = rich.contentType ?? "image/png"
        guard Self.isImageMediaType(contentType) else {
            throw HTTPError(.badRequest, message: "contentType must be an image media type such as image/png (at most 100 characters, no parameters)")
        }
        return .rich(message: rich.message, type: "img", contentType: contentType, data: image)
    }

    /// `image/` and a subtype of RFC 6838's restricted-name characters: the recipient's fetch
    /// answers with it as its Content-Type, so anything else would be a malformed header.
    static func isImageMediaType(_ text: String) -> Bool {
        let subtype = text.utf8.dropFirst(6)
        return text.hasPrefix("image/") && text.utf8.count <= 100 && subtype.first.map(isAlphanumeric) == true
            && subtype.allSatisfy { isAlphanumeric($0) || "!#$&^_.+-".utf8.contains($0) }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte)
    }

    /// Sends to every live registration of `user` on `platforms` at once, acting on the push
    /// service's feedback, and sums the results into the hub's outcome.
    func send(
        to user: String,
        platforms: [Platform],
        _ build: @escaping @Sendable (Platform) -> NativeNotification?
    ) async throws -> SendOutcome {
        let now = self.configuration.clock()
        await sweepIfDue(now: now)
        // A store that cannot be read is the store's failure (503), not the hub's outcome.
        let found = try await storing(writes: false) { try await $0.targets(tag: Self.userTag(user), now: now) }
        let store = try await store()
        let targets = found.filter { platforms.contains($0.platform!) }
        if let hub = hubSender {
            // The hub finds the devices; only platforms the user has a registration on are sent to.
            let present = platforms.filter { platform in targets.contains { $0.platform == platform } }
            guard !present.isEmpty else { return .noTarget }
            return await send(through: hub, to: user, platforms: present, build)
        }
        return await push(to: targets, store: store, build)
    }

    /// Sends to each of `targets` at once and acts on the push service's feedback: a dead
    /// handle's registration is removed.
    func push(
        to targets: [RegistrationStore.Registration], store: any BackendStore, _ build: @escaping @Sendable (Platform) -> NativeNotification?
    ) async -> SendOutcome {
        @Sendable func push(_ target: RegistrationStore.Registration) async -> (RegistrationStore.Registration, PushSender.Result?) {
            guard let notification = build(target.platform!) else { return (target, nil) }
            return (target, await sender.send(notification, to: target.handle!))
        }
        let results: [(RegistrationStore.Registration, PushSender.Result?)]
        if targets.count == 1 {
            // The common case, one device: sent from this task, without a child task to start and join.
            results = [await push(targets[0])]
        } else {
            results = await withTaskGroup(of: (RegistrationStore.Registration, PushSender.Result?).self) { group in
                for target in targets { group.addTask { await push(target) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        var removed = 0
        for (target, result) in results where result == .unregistered {
            // Dead whether this send removes it or a concurrent send to the same user did.
            if (try? await store.removeDead(id: target.id, handle: target.handle!)) == true {
                removed += 1
                counters.update { $0.feedbackRemoved += 1 }
            }
        }
        return Self.outcome(results.map(\.1), removed: removed)
    }

    /// The hub's outcome of a send to as many targets as `results`, of which `removed` were
    /// removed as dead.
    static func outcome(_ results: [PushSender.Result?], removed: Int) -> SendOutcome {
        var accepted = 0
        var failed = 0
        var dead = 0
        for result in results {
            switch result {
            case .accepted: accepted += 1
            case .unregistered: dead += 1
            case .failed, nil: failed += 1
            }
        }
        let state = SendOutcome.State(targets: results.count, accepted: accepted, dead: dead)
        return SendOutcome(outcome: state, targets: results.count, accepted: accepted, failed: failed, removed: removed)
    }

    /// The seeds' way: one hub send per platform to the user's tag; the hub fans out and acts on
    /// the push services' answers. The hub enqueues (its outcome names no counts), so targets and
    /// accepted pushes are the hub's to know.
    private func send(
        through hub: HubSender, to user: String, platforms: [Platform], _ build: @escaping @Sendable (Platform) -> NativeNotification?
    ) async -> SendOutcome {
        let taken = await withTaskGroup(of: Bool.self) { group in
            for platform in platforms {
                guard let notification = build(platform) else { continue }
                group.addTask { await hub.send(notification, tag: Self.userTag(user)) }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        let failed = taken.filter { !$0 }.count
        return SendOutcome(outcome: failed == 0 ? .enqueued : .abandoned, targets: 0, accepted: 0, failed: failed, removed: 0)
    }

    /// Refuses (413) a message whose native payload would exceed a push service's limit once
    /// escaped, before anything is stored or sent: the push service would refuse every push.
    static func checkFits(message: String, platforms: [Platform], _ build: (Platform) -> NativeNotification?) throws {
        guard !NativeNotification.surelyFits(message) else { return }
        for platform in platforms {
            if let problem = build(platform)?.oversize {
                throw HTTPError(.contentTooLarge, message: "message too large: \(problem)")
            }
        }
    }

    /// Refuses (400) a WNS message, or a sender's name, that toast XML cannot carry: WNS
    /// would refuse every push of it, and dropping or replacing characters would change it.
    static func checkXMLCarries(user: String, message: String) throws {
        for (what, text) in [("message", message), ("sender's name", user)] {
            if let scalar = NativeNotification.firstNonXMLCharacter(in: text) {
                let code = String(scalar.value, radix: 16, uppercase: true)
                throw HTTPError(
                    .badRequest,
                    message: "the \(what) holds U+\(String(repeating: "0", count: max(0, 4 - code.count)))\(code), which WNS toast XML cannot carry "
                        + "(XML allows no control character but tab, line feed and carriage return, nor U+FFFE or U+FFFF)"
                )
            }
        }
    }

    /// Whether the user has a live registration to push to.
    func hasTargets(_ user: String) async throws -> Bool {
        try await !storing(writes: false) { try await $0.targets(tag: Self.userTag(user), now: self.configuration.clock()) }.isEmpty
    }

    /// The seed's rule: 200 unless the hub's outcome is Abandoned (or Unknown), then 500.
    static func response(for outcome: SendOutcome) -> Response {
        answer(for: outcome).response
    }

    static func answer(for outcome: SendOutcome) -> CompleteResponse {
        .bytes(outcome.jsonBytes.bytes, status: outcome.outcome == .abandoned ? .internalServerError : .ok, contentType: "application/json")
    }
}

extension SendOutcome.State {
    /// Handles found dead are no longer targets: a send whose every target was dead found none;
    /// one with a target left that took nothing was abandoned.
    init(targets: Int, accepted: Int, dead: Int) {
        self = accepted > 0 ? .completed : (targets - dead == 0 ? .noTargetFound : .abandoned)
    }
}

extension SendOutcome {
    /// No live registration carries the recipient's tag.
    static let noTarget = SendOutcome(outcome: .noTargetFound, targets: 0, accepted: 0, failed: 0, removed: 0)
}
