/// The WNS OAuth request (`POST https://login.live.com/accesstoken.srf`), as pure rules: the
/// client-credentials grant with the app's package SID and secret and the scope
/// `notify.windows.com`. Errors are `{"error","error_description"}` with a 400.
enum WNSOAuth {
    static let scope = "notify.windows.com"

    struct Grant: Equatable, Sendable {
        var clientID: String
    }

    typealias Failure = GoogleOAuth.Failure

    /// The client the form authenticates. With `clients` empty any non-empty id and secret pass.
    static func check(form: [String: String], clients: [ProviderAuthConfiguration.WNSClient]) -> Result<Grant, Failure> {
        guard form["grant_type"] == "client_credentials" else {
            return .failure(Failure(error: "unsupported_grant_type", error_description: "The grant type must be client_credentials."))
        }
        guard let id = form["client_id"], !id.isEmpty, id.utf8.count <= 512, let secret = form["client_secret"], !secret.isEmpty else {
            return .failure(Failure(error: "invalid_request", error_description: "client_id and client_secret are required."))
        }
        guard form["scope"] == scope else {
            return .failure(Failure(error: "invalid_scope", error_description: "The provided value for the input parameter 'scope' is not valid."))
        }
        if !clients.isEmpty {
            guard let client = clients.first(where: { $0.id == id }) else {
                return .failure(Failure(error: "invalid_client", error_description: "The client does not exist."))
            }
            guard client.secret == secret else {
                return .failure(Failure(error: "invalid_client", error_description: "The client secret is incorrect."))
            }
        }
        return .success(Grant(clientID: id))
    }
}
