public import PushFleetCore

/// Descriptions that ship with pushfleet, written in the same `api:` language a scenario uses and
/// read by the same loader: the preset is not a second code path, only a text.
public enum APIPresets {
    public static let names = ["appbackend"]

    /// The seeds' AppBackend contract (docs/custom-backend.md walks through it): Basic
    /// credentials on every call, or with `auth: token` a login whose token goes in a Bearer
    /// header and is renewed once on a 401.
    public static func appBackend(auth: Scenario.AuthMode) -> String {
        let credentials: String
        switch auth {
        case .basic:
            credentials = """
                headers: { Authorization: "{{basic_auth}}" }
                """
        case .token:
            credentials = """
                headers: { Authorization: "Bearer {{token}}" }
                on: { 401: { then: login } }
                login:
                  method: POST
                  path: /api/login
                  headers: { Authorization: "{{basic_auth}}" }
                  extract: { token: /token }
                """
        }
        return credentials + "\n" + appBackendSteps
    }

    static let appBackendSteps = """
        # A registration id for the push token (reused while cached), then the registration itself;
        # the backend answers 410 for an id it no longer knows: forget it and start over, once.
        register:
          - name: post
            method: POST
            path: /api/register
            query: { handle: "{{device.push_token}}" }
            skip_when_known: [registration_id]
            extract: { registration_id: "" }
          - name: put
            method: PUT
            path: /api/register/{{registration_id}}
            json: { Platform: "{{device.platform}}", Handle: "{{device.push_token}}", Tags: [] }
            on: { 410: { forget: [registration_id], then: restart } }
        unregister:
          name: delete
          method: DELETE
          path: /api/register/{{registration_id}}
        # A leak probe claims the next user's tag for a registration of its own.
        probe:
          - method: POST
            path: /api/register
            extract: { probe_id: "" }
          - method: PUT
            path: /api/register/{{probe_id}}
            json: { Platform: "{{device.platform}}", Handle: "probe-{{device.push_token}}", Tags: ["username:{{victim}}"] }
        send:
          plain:
            per_platform: true
            method: POST
            path: /api/notifications
            query: { pns: "{{platform}}", to_tag: "{{to}}" }
            json: "{{message}}"
          secure:
            method: POST
            path: /api/notifications/secure
            query: { to_tag: "{{to}}" }
            json: "{{message}}"
            content_id: { json: [/id, /Id], optional: true }
          rich:
            method: POST
            path: /api/notifications/rich
            query: { to_tag: "{{to}}" }
            json: { message: "{{message}}", image: "{{image}}", contentType: "{{image_type}}" }
            content_id: { json: [/id, /Id], optional: true }
        fetch:
          secure:
            path: /api/notifications/{{id}}
            content: /Payload
          rich:
            path: /api/notifications/{{id}}
        receive:
          apns: { token: apns_hex, secure_id: /secureId, rich_id: /richId, rich_message: /richMessage }
          fcm:
            token: fcm
            secure_id: /message/data/secureId
            rich_id: /message/data/richId
            rich_message: /message/data/richMessage
          wns:
            token: channel_id
            rich_id: { json: /richId, push_type: wns/raw }
            rich_message: { json: /richMessage, push_type: wns/raw }
            secure_id: { body: true, push_type: wns/raw }
          # Browsers subscribe with the backend's VAPID key; the pushes are read once decrypted.
          webpush:
            token: subscription
            application_server_key: { path: /api/webpush/vapid, json: /publicKey }
            secure_id: /secureId
            rich_id: /richId
            rich_message: /richMessage
        """
}
