import Crypto
import Foundation
import Hummingbird
import PushFleetCore
import PushFleetServerSupport
import PushFleetWebPush
import PushFleetWire

extension ReferenceBackend {
    static let userTagPrefix = "username:"

    /// The tag of a user's registrations. Any user name has one: characters a tag may not hold
    /// (and `.`, the escape) are written `.HH` per UTF-8 byte, so `bob&x=1` becomes
    /// `username:bob.26x.3D1` and no two names share a tag.
    static func userTag(_ user: String) -> String {
        var tag = userTagPrefix
        // Grown once: every send looks its recipient's tag up.
        tag.reserveCapacity(userTagPrefix.utf8.count + user.utf8.count)
        for byte in user.utf8 {
            if byte != UInt8(ascii: ".") && isTagByte(byte) {
                tag.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                tag += "." + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return tag
    }

    func addRegisterRoutes(to api: RouterGroup<BasicRequestContext>) {
        // What a page subscribes with (`applicationServerKey`): the public half of the VAPID key
        // the backend signs its Web Push requests with. Public, as a page's script is.
        api.get("webpush/vapid") { _, _ -> Response in
            struct Key: Encodable {
                var publicKey: String
            }
            return .json(Key(publicKey: self.sender.vapid.applicationServerKey))
        }
        api.post("register") { request, _ -> Response in
            let user = try await self.authenticate(request)
            let handle = request.uri.queryParameters["handle"].map(String.init)
            if let handle { try self.validateHandle(handle) }
            let now = self.configuration.clock()
            await self.sweepIfDue(now: now)
            let id = try await self.storing { try await $0.createRegistration(owner: user, handle: handle, now: now) }
            if let hub = self.hubSender, let handle { try await self.throughHub { try await hub.deleteOthers(handle: handle, keep: id) } }
            // The seed answers the id as a JSON string.
            return .json(id)
        }

        api.put("register/:id") { request, context -> Response in
            let user = try await self.authenticate(request)
            let id = try context.parameters.require("id")
            let update = try await self.decodeBody(
                DeviceRegistration.self, from: request, limit: self.configuration.limits.maxBodyBytes,
                what: "{\"Platform\":\"apns|fcm|wns|mpns|webpush\",\"Handle\":\"…\",\"Tags\":[\"…\"]}"
            )
            guard let platform = Platform(name: update.platform) else {
                throw HTTPError(.badRequest, message: "unknown Platform '\(update.platform)'; expected apns, fcm, wns, mpns or webpush")
            }
            try self.validateHandle(update.handle)
            if platform == .webpush {
                // The handle is the browser's subscription; one that cannot be sent to is refused now.
                do { _ = try WebPushSubscription.parse(update.handle) } catch {
                    throw HTTPError(.badRequest, message: "a webpush Handle is the subscription's JSON: \(error)")
                }
            }
            let tags = try self.validatedTags(update.tags ?? [], caller: user)
            let result = try await self.storing {
                try await $0.updateRegistration(id: id, owner: user, platform: platform, handle: update.handle, tags: tags, now: self.configuration.clock())
            }
            switch result {
            case .updated:
                if let hub = self.hubSender {
                    try await self.throughHub { try await hub.createOrUpdate(id: id, platform: platform, handle: update.handle, tags: tags) }
                }
                return .empty()
            case .gone: throw HTTPError(.gone, message: "registration \(id) does not exist or has expired; create a new one")
            case .notOwner: throw HTTPError(.forbidden, message: "registration \(id) belongs to another user")
            }
        }

        api.delete("register/:id") { request, context -> Response in
            let user = try await self.authenticate(request)
            let id = try context.parameters.require("id")
            switch try await self.storing({ try await $0.deleteRegistration(id: id, owner: user, now: self.configuration.clock()) }) {
            case .updated:
                if let hub = self.hubSender { try await self.throughHub { try await hub.delete(id: id) } }
                return .empty()
            case .gone: throw HTTPError(.gone, message: "registration \(id) does not exist or has expired")
            case .notOwner: throw HTTPError(.forbidden, message: "registration \(id) belongs to another user")
            }
        }
    }

    /// A hub call of a registration request; a hub that fails it makes the request a 502.
    func throughHub(_ body: () async throws -> Void) async throws {
        do { try await body() } catch { throw HTTPError(.badGateway, message: "the notification hub failed: \(error)") }
    }

    func validateHandle(_ handle: String) throws {
        let limit = configuration.limits.maxHandleLength
        guard !handle.isEmpty, handle.utf8.count <= limit else {
            throw HTTPError(.badRequest, message: "Handle must be 1 to \(limit) bytes")
        }
        guard handle.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw HTTPError(.badRequest, message: "Handle must be printable ASCII without spaces")
        }
    }

    /// The client's tags plus the caller's own user tag. The seed left "check the user may add
    /// these tags" as a TODO; a `username:` tag naming someone else would route their
    /// notifications to this device, so it is refused.
    func validatedTags(_ tags: [String], caller: String) throws -> Set<String> {
        let limits = configuration.limits
        guard tags.count < limits.maxTags else {
            throw HTTPError(.badRequest, message: "at most \(limits.maxTags - 1) tags besides the user tag")
        }
        let own = Self.userTag(caller)
        for tag in tags {
            try validateTag(tag)
            if tag.hasPrefix(Self.userTagPrefix) && tag != own {
                throw HTTPError(.forbidden, message: "tag '\(tag)' names another user; only '\(own)' is allowed")
            }
        }
        return Set(tags).union([own])
    }

    func validateTag(_ tag: String) throws {
        let limit = configuration.limits.maxTagLength
        guard !tag.isEmpty, tag.utf8.count <= limit else {
            throw HTTPError(.badRequest, message: "tags must be 1 to \(limit) characters")
        }
        guard tag.utf8.allSatisfy(Self.isTagByte) else {
            throw HTTPError(.badRequest, message: "tag '\(tag)' may use only letters, digits and _@#.:-")
        }
    }

    /// A tag's characters: ASCII letters and digits and `_@#.:-`. Tested per byte (any byte of a
    /// character beyond ASCII fails), not with `CharacterSet`, which is Foundation's and was ~0.5%
    /// of `serve`'s CPU per secure push, for two tags a send.
    static func isTagByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "_"), UInt8(ascii: "@"), UInt8(ascii: "#"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "-"): true
        default: false
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
