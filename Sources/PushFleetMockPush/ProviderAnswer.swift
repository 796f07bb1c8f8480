import Foundation
import Hummingbird
import PushFleetCore
import PushFleetServerSupport
import PushFleetWire

/// A provider endpoint's answer to one request: a push accepted (or a request that was no push),
/// or a push refused with the status and reason its sender is told, which the runs watching the
/// service are told too.
enum ProviderAnswer {
    case done(Response)
    case refused(Response, status: Int, reason: String)

    var response: Response {
        switch self {
        case .done(let response), .refused(let response, _, _): response
        }
    }
}

extension PushService {
    /// Answers one provider request: numbers the push, lets `decide` answer it, and reports a
    /// refusal to the runs watching (``reportRefusal``) with the request's token and push type.
    func answer(
        _ request: Request, platform: Platform, token: String?, pushType: String?, hubAt: Int64?, bodyLimit: Int,
        tokenInBody: ((Data) -> String?)? = nil, decide: (inout Request, UInt64) async -> ProviderAnswer
    ) async -> Response {
        var request = request
        let push = nextPush()
        let answer = await decide(&request, push)
        if case .refused(_, let status, let reason) = answer {
            await reportRefusal(
                &request, push: push, platform: platform, token: token, pushType: pushType, status: status, reason: reason, hubAt: hubAt,
                bodyLimit: bodyLimit, tokenInBody: tokenInBody
            )
        }
        return answer.response
    }

    /// Reports a refused push to the runs watching, with its token and its body; a body the
    /// refusal came before is read now (up to `bodyLimit`), and `tokenInBody` finds the token in
    /// it when the request names it there (FCM).
    func reportRefusal(
        _ request: inout Request, push: UInt64, platform: Platform, token: String?, pushType: String?, status: Int, reason: String, hubAt: Int64?,
        bodyLimit: Int, tokenInBody: ((Data) -> String?)? = nil
    ) async {
        guard watchers.isActive else { return }
        let instant = now()
        let collected: ByteBuffer?? = try? await request.collectBody(limit: bodyLimit)
        let data = collected.flatMap { $0 }?.data
        let text = data.flatMap { String(validating: $0, as: UTF8.self) }
        watchers.report(
            PushHop(
                push: push, step: .refused, at: instant, platform: platform.rawValue, token: token ?? data.flatMap { tokenInBody?($0) } ?? "",
                pushType: pushType, body: text ?? data?.base64EncodedString(), base64: text == nil && data != nil ? true : nil, hubAt: hubAt,
                status: status, reason: reason
            )
        )
    }
}
