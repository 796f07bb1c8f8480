import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire

/// A provider request with its body read: what every provider endpoint decides on, whether it
/// came through the router or was read on the event loop (``ProviderRoutes``).
struct ProviderRequest {
    var head: HTTPRequest
    /// Nil when it is longer than the endpoint reads.
    var body: ByteBuffer?
    /// The connection it arrived on; nil outside a tracked server (a hub in this process).
    var connection: ConnectionState?

    var headers: HTTPFields { head.headerFields }

    /// The W3C trace context the sender handed on with the push, when well formed.
    var traceparent: String? {
        guard let text = head.headerFields.value(of: .traceparent), TraceIdentity(traceparent: text) != nil else { return nil }
        return text
    }

    /// Reads the body of a router's request, up to `limit` bytes.
    static func collecting(_ request: Request, limit: Int) async -> ProviderRequest {
        var request = request
        let body: ByteBuffer? = (try? await request.collectBody(limit: limit)) ?? nil
        return ProviderRequest(head: request.head, body: body, connection: ConnectionState.current)
    }
}

/// A provider endpoint's answer to one request: a push accepted (or a request that was no push),
/// or a push refused with the status and reason its sender is told, which the runs watching the
/// service are told too.
enum ProviderAnswer {
    case done(CompleteResponse)
    case refused(CompleteResponse, status: Int, reason: String)

    var response: CompleteResponse {
        switch self {
        case .done(let response), .refused(let response, _, _): response
        }
    }
}

extension PushService {
    /// Answers one provider request: numbers the push, lets `decide` answer it, and reports a
    /// refusal to the runs watching (``reportRefusal``) with the request's token and push type.
    /// Nil when `decide` needs asynchronous work first (a provider token to verify).
    func answer(
        _ request: ProviderRequest, platform: Platform, token: String?, pushType: String?, hubAt: Int64?,
        tokenInBody: ((ByteBuffer) -> String?)? = nil, decide: (ProviderRequest, UInt64) -> ProviderAnswer?
    ) -> CompleteResponse? {
        let push = nextPush()
        guard let answer = decide(request, push) else { return nil }
        if case .refused(_, let status, let reason) = answer {
            reportRefusal(
                request, push: push, platform: platform, token: token, pushType: pushType, status: status, reason: reason, hubAt: hubAt,
                tokenInBody: tokenInBody
            )
        }
        return answer.response
    }

    /// Reports a refused push to the runs watching, with its token and its body; `tokenInBody`
    /// finds the token in the body when the request names it there (FCM).
    func reportRefusal(
        _ request: ProviderRequest, push: UInt64, platform: Platform, token: String?, pushType: String?, status: Int, reason: String, hubAt: Int64?,
        tokenInBody: ((ByteBuffer) -> String?)? = nil
    ) {
        guard watchers.isActive else { return }
        let instant = now()
        let data = request.body?.data
        let text = data.flatMap { String(validating: $0, as: UTF8.self) }
        watchers.report(
            PushHop(
                push: push, step: .refused, at: instant, platform: platform.rawValue,
                token: token ?? request.body.flatMap { tokenInBody?($0) } ?? "",
                pushType: pushType, body: text ?? data?.base64EncodedString(), base64: text == nil && data != nil ? true : nil, hubAt: hubAt,
                status: status, reason: reason, trace: request.traceparent
            )
        )
    }
}
