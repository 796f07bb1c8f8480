import HTTPTypes
import Hummingbird
import PushFleetServerSupport

/// The token endpoints senders call before they push: Google's (`oauth2.googleapis.com/token`)
/// for FCM, and Microsoft's (`login.live.com/accesstoken.srf`) for WNS. One server answers for
/// every host name, so the paths tell them apart.
struct OAuthEndpoints {
    static let maxRequest = 64 * 1024
    static let googlePaths = ["/token", "/oauth2/v4/token"]
    static let wnsPath = "/accesstoken.srf"

    let authority: ProviderAuthority

    private struct GoogleToken: Encodable {
        var access_token: String
        var expires_in: Int64
        var token_type = "Bearer"
    }

    private struct WNSToken: Encodable {
        var token_type = "bearer"
        var access_token: String
        var expires_in: Int64
    }

    func register(on router: Router<BasicRequestContext>) {
        for path in Self.googlePaths {
            router.post(RouterPath(stringLiteral: path)) { request, _ -> Response in
                guard let form = await Self.form(request) else { return Self.badForm }
                switch await authority.issueGoogleToken(form: form) {
                case .success(let issued): return .json(GoogleToken(access_token: issued.token, expires_in: issued.expiresIn))
                case .failure(let failure): return .json(failure, status: .badRequest)
                }
            }
        }
        router.post(RouterPath(stringLiteral: Self.wnsPath)) { request, _ -> Response in
            guard let form = await Self.form(request) else { return Self.badForm }
            switch authority.issueWNSToken(form: form) {
            case .success(let issued): return .json(WNSToken(access_token: issued.token, expires_in: issued.expiresIn))
            case .failure(let failure): return .json(failure, status: .badRequest)
            }
        }
    }

    private static let badForm = Response.json(
        GoogleOAuth.Failure(error: "invalid_request", error_description: "The body must be application/x-www-form-urlencoded fields."),
        status: .badRequest
    )

    /// The request's form fields; nil when the body is too large, not UTF-8 or not a form.
    private static func form(_ request: Request) async -> [String: String]? {
        var request = request
        guard let body = try? await request.collectBody(limit: maxRequest), let text = String(validating: body.readableBytesView, as: UTF8.self)
        else { return nil }
        return FormBody.parse(text)
    }
}
