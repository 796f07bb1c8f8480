import Foundation
import Hummingbird
import HTTPTypes
package import Logging
import NIOCore
package import PushFleetServerSupport
package import PushFleetWire
package import ServiceLifecycle
import Synchronization

/// A backend shaped unlike the seed's: one device endpoint per platform, each with a body of its
/// own (`POST /devices/apns {"token"}`, `POST /devices/fcm {"registration_id"}`, and for WNS a
/// channel then its activation), a plain push endpoint per platform, and a secure send that
/// names the stored content `secret_id`. It refuses a body not shaped for its endpoint, so a
/// device that made another platform's request never registers; and it pushes every
/// `misdeliverEvery`-th secure id to another user's device instead of the recipient's, refusing
/// that reader's fetch (404), and counts it: the ground truth for the runner's misdelivered and
/// lost counts.
package final class PlatformEndpointsBackend: Sendable {
    package struct Tally: Sendable, Equatable {
        /// Registrations made, by the endpoint's platform.
        package var registered: [Platform: Int] = [:]
        /// Requests refused for a body not shaped for their endpoint.
        package var refused = 0
        package var misdelivered = 0
        /// Pushes the recipient's devices did not get, sent to the stranger instead.
        package var dropped = 0

        package init() {}
    }

    private struct Device {
        var user: String
        var platform: Platform
        var handle: String
        var active: Bool
    }

    private struct State {
        var devices: [String: Device] = [:]
        var secrets: [String: (recipient: String, payload: String)] = [:]
        var nextID = 0
        var secureSends = 0
        var tally = Tally()
    }

    package let bound = Readiness<ListenAddress>()
    private let sender: TestPushSender
    private let misdeliverEvery: Int
    private let state = Mutex(State())

    package init(pushService: String, misdeliverEvery: Int) {
        self.sender = TestPushSender(pushService: pushService)
        self.misdeliverEvery = misdeliverEvery
    }

    package var tally: Tally { state.withLock { $0.tally } }

    package func shutdown() async {
        await sender.shutdown()
    }

    package func makeService(logger: Logger) -> any Service {
        let router = Router()
        router.post("/devices/apns") { request, _ in try await self.register(request, .apns, field: "token") }
        router.post("/devices/fcm") { request, _ in try await self.register(request, .fcm, field: "registration_id") }
        router.post("/devices/wns") { request, _ in try await self.register(request, .wns, field: "channel_uri", active: false) }
        router.put("/devices/wns/:id/active") { request, context in
            let user = try HostileBackend.user(request)
            let id = context.parameters.get("id") ?? ""
            return try self.state.withLock { state in
                guard state.devices[id]?.user == user, state.devices[id]?.platform == .wns else { throw HTTPError(.notFound) }
                state.devices[id]?.active = true
                return Response(status: .noContent)
            }
        }
        router.post("/push/:platform") { request, context in
            try await self.pushPlain(request, platform: Platform(name: context.parameters.get("platform") ?? "") ?? .mpns)
        }
        router.post("/secrets") { request, _ in try await self.sendSecret(request) }
        router.get("/secrets/:id") { request, context in
            let user = try HostileBackend.user(request)
            guard let secret = self.state.withLock({ $0.secrets[context.parameters.get("id") ?? ""] }), secret.recipient == user else {
                throw HTTPError(.notFound)
            }
            return Self.json(["payload": secret.payload])
        }
        let bound = self.bound
        return Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "platform-endpoints"),
            onServerRunning: { bound.succeed(ListenAddress(host: "127.0.0.1", port: $0.localAddress?.port ?? 0)) }, logger: logger
        )
    }

    private static func json(_ object: [String: Any], status: HTTPResponse.Status = .ok) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// The body as a JSON object whose only keys are `keys`, or a 400 (counted).
    private func object(_ request: Request, keys: Set<String>) async throws -> [String: Any] {
        var request = request
        let body = try await request.collectBody(upTo: 64 * 1024)
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any], Set(object.keys) == keys else {
            state.withLock { $0.tally.refused += 1 }
            throw HTTPError(.badRequest)
        }
        return object
    }

    private func register(_ request: Request, _ platform: Platform, field: String, active: Bool = true) async throws -> Response {
        let user = try HostileBackend.user(request)
        guard let handle = try await object(request, keys: [field])[field] as? String, !handle.isEmpty else { throw HTTPError(.badRequest) }
        let id = state.withLock { state in
            state.nextID += 1
            let id = "d\(state.nextID)"
            state.devices[id] = Device(user: user, platform: platform, handle: handle, active: active)
            state.tally.registered[platform, default: 0] += 1
            return id
        }
        return Self.json(["device": id], status: .created)
    }

    private func devices(of user: String, on platforms: [Platform]) -> [Device] {
        state.withLock { state in
            state.devices.values.filter { $0.user == user && $0.active && platforms.contains($0.platform) }.sorted { $0.handle < $1.handle }
        }
    }

    private func pushPlain(_ request: Request, platform: Platform) async throws -> Response {
        _ = try HostileBackend.user(request)
        let (keys, field): (Set<String>, String) =
            switch platform {
            case .apns: (["user", "alert"], "alert")
            case .fcm: (["user", "data"], "data")
            case .wns: (["user", "toast"], "toast")
            case .mpns, .webpush: throw HTTPError(.notFound)
            }
        let object = try await object(request, keys: keys)
        let text = (field == "data" ? (object["data"] as? [String: Any])?["text"] : object[field]) as? String
        guard let to = object["user"] as? String, let text else { throw HTTPError(.badRequest) }
        let (raw, pushType): (String, String) =
            switch platform {
            case .apns: (Self.text(["aps": ["alert": text]]), "alert")
            case .fcm: (Self.text(["data": ["message": text]]), "data")
            default: ("<toast><visual><binding template=\"ToastText01\"><text id=\"1\">\(text)</text></binding></visual></toast>", "wns/toast")
            }
        for device in devices(of: to, on: [platform]) {
            _ = await sender.push(raw: raw, platform: platform, handle: device.handle, pushType: pushType)
        }
        return Response(status: .ok)
    }

    private func sendSecret(_ request: Request) async throws -> Response {
        _ = try HostileBackend.user(request)
        let object = try await object(request, keys: ["to", "payload"])
        guard let to = object["to"] as? String, let payload = object["payload"] as? String else { throw HTTPError(.badRequest) }
        let (id, count) = state.withLock { state in
            state.nextID += 1
            state.secureSends += 1
            let id = "s\(state.nextID)"
            state.secrets[id] = (to, payload)
            return (id, state.secureSends)
        }
        var targets = devices(of: to, on: Platform.pushable)
        if count % misdeliverEvery == 0, let stranger = state.withLock({ state in
            state.devices.values.filter { $0.user != to && $0.active }.min { $0.handle < $1.handle }
        }) {
            // Nobody else fetches this content: only the id the send's answer named ties the
            // stranger's push to this send.
            state.withLock {
                $0.tally.misdelivered += 1
                $0.tally.dropped += targets.count
            }
            targets = [stranger]
        }
        for device in targets {
            let (raw, pushType): (String, String) =
                switch device.platform {
                case .apns: (Self.text(["aps": ["content-available": 1], "secretId": id]), "background")
                case .fcm: (Self.text(["data": ["secretId": id]]), "data")
                default: (id, "wns/raw")
                }
            _ = await sender.push(raw: raw, platform: device.platform, handle: device.handle, pushType: pushType)
        }
        return Self.json(["secret_id": id, "outcome": "sent"])
    }

    private static func text(_ object: [String: Any]) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data(), as: UTF8.self)
    }
}
