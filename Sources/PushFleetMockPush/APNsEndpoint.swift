import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire

/// The APNs provider API: `POST /3/device/{token}`, with Apple's headers, limits and error reasons.
struct APNsEndpoint {
    static let maxPayload = 4096
    static let pushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]

    let service: PushService

    func register(on router: Router<BasicRequestContext>) {
        router.post("/3/device/:token") { request, context in
            await handle(request, token: context.parameters.get("token") ?? "")
        }
        // Apple's answers for requests that reach no device.
        router.post("/3/device") { request, _ in
            reject(.badRequest, "MissingDeviceToken", id: request.headers[.apnsID] ?? UUIDText.random()).response.response
        }
        router.post("/3/**") { request, _ in
            reject(.notFound, "BadPath", id: request.headers[.apnsID] ?? UUIDText.random()).response.response
        }
        for method in [HTTPRequest.Method.get, .put, .delete, .patch] {
            router.on("/3/device/:token", method: method) { request, _ in
                reject(.methodNotAllowed, "MethodNotAllowed", id: request.headers[.apnsID] ?? UUIDText.random()).response.response
            }
        }
    }

    private struct Reason: Encodable {
        var reason: String
        var timestamp: Int64?
    }

    private func reject(
        _ status: HTTPResponse.Status,
        _ reason: String,
        id: String,
        timestamp: Int64? = nil
    ) -> ProviderAnswer {
        service.recordRejection("apns:\(reason)")
        return .refused(.json(Reason(reason: reason, timestamp: timestamp), status: status, headers: [.apnsID: id]), status: status.code, reason: reason)
    }

    /// Answers one provider request through the router; `hubAt` when a notification hub in this
    /// process sends it.
    func handle(_ request: Request, token: String, hubAt: Int64? = nil) async -> Response {
        let request = await ProviderRequest.collecting(request, limit: Self.maxPayload)
        if let answer = respond(request, token: token, hubAt: hubAt) { return answer.response }
        // A provider token new to its connection, checked against a configured key first.
        let verified = await service.authority.authenticateAPNs(authorization: request.headers[.authorization], connection: request.connection)
        return (respond(request, token: token, hubAt: hubAt, verified: verified) ?? .empty(status: .internalServerError)).response
    }

    /// Answers one provider request whose body was read; nil while its provider token waits for
    /// a signature check (``ProviderAuthority/authenticateAPNs(authorization:connection:)``),
    /// whose outcome a second call passes as `verified`.
    func respond(_ request: ProviderRequest, token: String, hubAt: Int64? = nil, verified: ProviderAuthority.APNsOutcome? = nil) -> CompleteResponse? {
        let headers = APNsHeaders(request.headers)
        let normalized = TokenRules.normalized(token[...], for: .apns)
        return service.answer(request, platform: .apns, token: normalized, pushType: headers.pushType ?? "alert", hubAt: hubAt) {
            decide($0, headers, token: token, normalized: normalized, push: $1, hubAt: hubAt, verified: verified)
        }
    }

    private func decide(
        _ request: ProviderRequest, _ headers: APNsHeaders, token: String, normalized: String, push number: UInt64, hubAt: Int64?,
        verified: ProviderAuthority.APNsOutcome?
    ) -> ProviderAnswer? {
        let id: String
        if let given = headers.id {
            guard UUIDText.isValid(given) else { return reject(.badRequest, "BadMessageId", id: UUIDText.random()) }
            id = given
        } else {
            id = UUIDText.random()
        }
        guard !headers.duplicated else { return reject(.badRequest, "DuplicateHeaders", id: id) }
        guard let outcome = verified ?? service.authority.authenticateAPNsNow(authorization: headers.authorization, connection: request.connection)
        else { return nil }
        let bundles: [String]
        switch outcome {
        case .authorized(let allowed): bundles = allowed
        case .rejected(let status, let reason): return reject(status, reason, id: id)
        }
        // A certificate for a single bundle names the topic itself; a token names none.
        let certificate = request.connection?.peerCertificateDER != nil
        guard let topic = headers.topic.flatMap({ $0.isEmpty ? nil : $0 }) ?? (certificate && bundles.count == 1 ? bundles[0] : nil)
        else { return reject(.badRequest, "MissingTopic", id: id) }
        guard APNsTopics.isAllowed(topic, bundles: bundles) else { return reject(.badRequest, "TopicDisallowed", id: id) }
        let pushType = headers.pushType ?? "alert"
        guard Self.pushTypes.contains(pushType) else { return reject(.badRequest, "InvalidPushType", id: id) }
        if let priority = headers.priority, priority != "10", priority != "5", priority != "1" {
            return reject(.badRequest, "BadPriority", id: id)
        }
        var retention = PushService.Retention.defaultDuration
        if let expiration = headers.expiration {
            guard let seconds = Int64(expiration), seconds >= 0 else {
                return reject(.badRequest, "BadExpirationDate", id: id)
            }
            retention = seconds == 0 ? .doNotStore : .until(Saturating.multiply(seconds, 1_000_000_000))
        }
        if let collapseID = headers.collapseID, collapseID.utf8.count > 64 {
            return reject(.badRequest, "BadCollapseId", id: id)
        }
        guard TokenRules.isValidAPNs(token[...]) else { return reject(.badRequest, "BadDeviceToken", id: id) }
        guard let body = request.body, body.readableBytes <= Self.maxPayload else {
            return reject(.contentTooLarge, "PayloadTooLarge", id: id)
        }
        guard body.readableBytes > 0 else { return reject(.badRequest, "PayloadEmpty", id: id) }
        guard Self.isJSONObject(body) else {
            // APNs names no reason for a body that is not a JSON dictionary; this one is the mock's.
            return reject(.badRequest, "BadPayload", id: id)
        }
        let push = PushService.IncomingPush(
            address: DeviceAddress(platform: .apns, token: normalized),
            id: id,
            pushType: pushType,
            body: String(buffer: body),
            retention: retention,
            push: number,
            hubAt: hubAt,
            trace: request.traceparent
        )
        switch service.accept(push) {
        case .accepted:
            return .done(.empty(headers: [.apnsID: id]))
        case .unregistered(let since):
            return reject(.gone, "Unregistered", id: id, timestamp: since)
        case .throttled:
            return reject(.tooManyRequests, "TooManyRequests", id: id)
        }
    }

    /// A JSON object, judged in one pass where that is sure, else by Foundation.
    static func isJSONObject(_ body: ByteBuffer) -> Bool {
        if let sure = body.withUnsafeReadableBytes({ StrictJSONReader.isObject($0.bindMemory(to: UInt8.self)) }) { return sure }
        return (try? JSONSerialization.jsonObject(with: body.data)) is [String: Any]
    }
}

extension HTTPField.Name {
    static let apnsID = Self("apns-id")!
    static let apnsTopic = Self("apns-topic")!
    static let apnsPushType = Self("apns-push-type")!
    static let apnsPriority = Self("apns-priority")!
    static let apnsExpiration = Self("apns-expiration")!
    static let apnsCollapseID = Self("apns-collapse-id")!
}
