import Foundation
import HTTPTypes
import Hummingbird
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire

/// FCM HTTP v1: `POST /v1/projects/{project}/messages:send`, with Google's error JSON.
struct FCMEndpoint {
    /// FCM's limit on a message's payload.
    static let maxPayload = 4096
    /// Requests larger than this are not read at all.
    static let maxRequest = 64 * 1024

    let service: PushService

    func register(on router: Router<BasicRequestContext>) {
        router.post("/v1/projects/:project/messages:send") { request, context in
            await handle(request, project: context.parameters.get("project") ?? "")
        }
    }

    private struct ErrorBody: Encodable {
        /// FCM's own error code, or (for authentication) Google's `ErrorInfo`.
        struct Detail: Encodable {
            var type = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
            var errorCode: String?
            var reason: String?
            var domain: String?

            enum CodingKeys: String, CodingKey {
                case type = "@type"
                case errorCode, reason, domain
            }

            static func errorInfo(_ reason: String) -> Detail {
                Detail(type: "type.googleapis.com/google.rpc.ErrorInfo", reason: reason, domain: "googleapis.com")
            }
        }

        struct Inner: Encodable {
            var code: Int
            var message: String
            var status: String
            var details: [Detail]
        }

        var error: Inner
    }

    private struct Accepted: Encodable {
        var name: String
    }

    /// Google's error shape: HTTP code, canonical status, and the FCM error code in details.
    private func reject(_ status: HTTPResponse.Status, _ canonical: String, _ errorCode: String, _ message: String) -> ProviderAnswer {
        reject(status, canonical, label: errorCode, message, detail: .init(errorCode: errorCode))
    }

    private func reject(
        _ status: HTTPResponse.Status, _ canonical: String, label: String, _ message: String, detail: ErrorBody.Detail
    ) -> ProviderAnswer {
        service.recordRejection("fcm:\(label)")
        let response = CompleteResponse.json(ErrorBody(error: .init(code: status.code, message: message, status: canonical, details: [detail])), status: status)
        // What a client shows: FCM's error code, or for authentication Google's canonical status.
        return .refused(response, status: status.code, reason: detail.errorCode ?? canonical)
    }

    /// Google's answers for a request whose OAuth access token does not allow the send.
    private func authenticate(_ request: ProviderRequest, project: String) -> ProviderAnswer? {
        let unauthenticated = "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."
        let grant: GoogleOAuth.Grant
        switch service.authority.googleGrant(authorization: request.headers[.authorization]) {
        case .valid(let valid):
            grant = valid
        case .expired:
            return reject(.unauthorized, "UNAUTHENTICATED", label: "ACCESS_TOKEN_EXPIRED", unauthenticated, detail: .errorInfo("ACCESS_TOKEN_EXPIRED"))
        case .unknown:
            let reason = request.headers[.authorization] == nil ? "CREDENTIALS_MISSING" : "ACCESS_TOKEN_TYPE_UNSUPPORTED"
            return reject(.unauthorized, "UNAUTHENTICATED", label: reason, unauthenticated, detail: .errorInfo(reason))
        }
        guard grant.maySendMessages else {
            return reject(
                .forbidden, "PERMISSION_DENIED", label: "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "Request had insufficient authentication scopes.",
                detail: .errorInfo("ACCESS_TOKEN_SCOPE_INSUFFICIENT")
            )
        }
        if let own = grant.project, own != project {
            return reject(
                .forbidden, "PERMISSION_DENIED", label: "IAM_PERMISSION_DENIED",
                "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project.prefix(100))' (or it may not exist).",
                detail: .errorInfo("IAM_PERMISSION_DENIED")
            )
        }
        return nil
    }

    private func invalid(_ message: String) -> ProviderAnswer {
        reject(.badRequest, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message)
    }

    /// Answers one provider request through the router; `hubAt` when a notification hub in this
    /// process sends it.
    func handle(_ request: Request, project: String, hubAt: Int64? = nil) async -> Response {
        respond(await ProviderRequest.collecting(request, limit: Self.maxRequest), project: project, hubAt: hubAt).response
    }

    /// Answers one provider request whose body was read.
    func respond(_ request: ProviderRequest, project: String, hubAt: Int64? = nil) -> CompleteResponse {
        let answer = service.answer(request, platform: .fcm, token: nil, pushType: nil, hubAt: hubAt, tokenInBody: { Self.token(in: $0.data) }) {
            decide($0, project: project, push: $1, hubAt: hubAt)
        }
        return answer ?? .empty(status: .internalServerError)
    }

    /// `message.token` of a request body, if it names one.
    static func token(in body: Data) -> String? {
        ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any]).flatMap { $0["message"] as? [String: Any] }?["token"] as? String
    }

    private func decide(_ request: ProviderRequest, project: String, push number: UInt64, hubAt: Int64?) -> ProviderAnswer {
        if let refusal = authenticate(request, project: project) { return refusal }
        guard let body = request.body else {
            return invalid("Request payload size exceeds the limit.")
        }
        guard let root = try? JSONSerialization.jsonObject(with: body.data) as? [String: Any],
            let message = root["message"] as? [String: Any]
        else {
            return invalid("Invalid JSON payload received: expected an object with a \"message\" object.")
        }
        guard let token = message["token"] as? String else {
            return invalid("The mock push service delivers to \"message.token\" only (no topic or condition).")
        }
        guard TokenRules.isValidFCM(token[...]) else {
            return invalid("The registration token is not a valid FCM registration token")
        }
        if let data = message["data"] {
            guard let fields = data as? [String: Any], fields.values.allSatisfy({ $0 is String }) else {
                return invalid("Invalid value at 'message.data': every value must be a string.")
            }
        }
        guard body.readableBytes - token.utf8.count <= Self.maxPayload else {
            return invalid("Message is too big.")
        }
        let validateOnly = root["validate_only"] as? Bool ?? false
        let id = String(UInt64.random(in: 1...UInt64.max), radix: 16)
        let name = "projects/\(project)/messages/\(id)"
        if validateOnly { return .done(.json(Accepted(name: "projects/\(project)/messages/fake_message_id"))) }

        let push = PushService.IncomingPush(
            address: DeviceAddress(platform: .fcm, token: token),
            id: id,
            pushType: message["notification"] == nil ? "data" : "notification",
            body: String(buffer: body),
            retention: retention(message),
            push: number,
            hubAt: hubAt,
            trace: request.traceparent,
            collapseKey: Self.collapseKey(message)
        )
        switch service.accept(push) {
        case .accepted:
            return .done(.json(Accepted(name: name)))
        case .unregistered:
            return reject(.notFound, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")
        case .throttled:
            return reject(.tooManyRequests, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded for the device.")
        }
    }

    /// A collapsible message's key: a notification message is always collapsible, under the
    /// app's own key (and ignores `collapse_key`); a data message is when it names one.
    static func collapseKey(_ message: [String: Any]) -> String? {
        if message["notification"] != nil { return "default" }
        guard let key = (message["android"] as? [String: Any])?["collapse_key"] as? String, !key.isEmpty else { return nil }
        return key
    }

    /// `message.android.ttl` ("3.5s"; "0s" means deliver now or never), else the default.
    private func retention(_ message: [String: Any]) -> PushService.Retention {
        guard let android = message["android"] as? [String: Any], let ttl = android["ttl"] as? String,
            let duration = try? DurationText.parse(ttl)
        else { return .defaultDuration }
        if duration == .zero { return .doNotStore }
        return .until(Saturating.add(service.now(), duration.nanoseconds))
    }
}
