"""An AppBackend (the seeds' contract) written against Azure Notification Hubs with a PyPI client.

It knows nothing of pushfleet: give it a connection string and it keeps devices as hub
installations (tag username:<user>, plus a template for secure pushes) and sends through the
hub — plain sends as native notifications to a tag expression, secure sends as a template
notification (APNs, FCM v1) and a native raw one (WNS). pushfleet load-tests it unchanged.

Usage: hub_backend.py --listen 127.0.0.1:PORT --connection-string "Endpoint=…" --hub-name hub
"""
import argparse
import base64
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, urlparse

from azure_notification_hub import (
    NotificationHubsClient,
    create_apple_notification,
    create_fcm_v1_notification,
    create_template_notification,
    create_windows_raw_notification,
    create_windows_toast_notification,
)
from azure_notification_hub.client import AzureNHError

PLATFORMS = {"apns": "apns", "fcm": "fcmv1", "gcm": "fcmv1", "wns": "wns"}
SECURE_TEMPLATES = {
    "apns": '{"aps":{"content-available":1},"secureId":"$(secureId)"}',
    "fcmv1": '{"message":{"data":{"secureId":"$(secureId)"}}}',
}


class State:
    def __init__(self, connection_string, hub_name, pns):
        self.connection_string = connection_string
        self.hub_name = hub_name
        self.local = threading.local()
        self.pns = pns.rstrip("/")
        self.lock = threading.Lock()
        self.owners = {}  # installation id -> user
        self.by_handle = {}  # handle -> installation id
        self.notifications = {}  # id -> (recipient, payload, read)

    @property
    def client(self):
        # One client (and connection pool) per server thread: httpx clients are not shared across threads here.
        if not hasattr(self.local, "client"):
            self.local.client = NotificationHubsClient(self.connection_string, self.hub_name)
        return self.local.client


def xml_escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State = None

    def log_message(self, *args):
        pass

    def reply(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def user(self):
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return None
        try:
            name, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except Exception:
            return None
        return name if name and name == password else None

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"null") if length else None

    def route(self, method):
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = [p for p in url.path.split("/") if p]
        if parts == ["health"]:
            return self.reply(200, "ok")
        user = self.user()
        if user is None:
            return self.reply(401, {"error": "unauthorized"})
        try:
            if method == "POST" and parts == ["api", "register"]:
                return self.create(user, query.get("handle"))
            if method == "PUT" and parts[:2] == ["api", "register"] and len(parts) == 3:
                return self.update(user, parts[2], self.body())
            if method == "DELETE" and parts[:2] == ["api", "register"] and len(parts) == 3:
                return self.delete(user, parts[2])
            if method == "POST" and parts == ["api", "notifications"]:
                return self.plain(user, query["pns"], query["to_tag"], self.body())
            if method == "POST" and parts == ["api", "notifications", "secure"]:
                return self.secure(user, query.get("to_tag") or user, self.body())
            if method == "GET" and parts[:2] == ["api", "notifications"] and len(parts) == 3:
                return self.read(user, parts[2])
        except AzureNHError as error:
            return self.reply(502, {"error": str(error)})
        except (KeyError, ValueError, TypeError) as error:
            return self.reply(400, {"error": str(error)})
        return self.reply(404, {"error": "not found"})

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_PUT(self):
        self.route("PUT")

    def do_DELETE(self):
        self.route("DELETE")

    # The seed's register calls, on installations.
    def create(self, user, handle):
        state = self.state
        with state.lock:
            existing = state.by_handle.get(handle) if handle else None
            if existing and state.owners.get(existing) == user:
                return self.reply(200, existing)
            installation_id = str(uuid.uuid4())
            state.owners[installation_id] = user
            if handle:
                state.by_handle[handle] = installation_id
        if existing:
            # The handle now belongs to another user's device: its old installation goes.
            state.client.delete_installation(existing)
        return self.reply(200, installation_id)

    def update(self, user, installation_id, registration):
        state = self.state
        with state.lock:
            owner = state.owners.get(installation_id)
        if owner is None:
            return self.reply(410, {"error": "gone"})
        if owner != user:
            return self.reply(403, {"error": "not yours"})
        platform = PLATFORMS.get(str(registration.get("Platform", "")).lower())
        if platform is None:
            return self.reply(400, {"error": "unknown platform"})
        own = f"username:{user}"
        tags = [str(tag) for tag in registration.get("Tags") or []]
        if any(tag.startswith("username:") and tag != own for tag in tags):
            # A tag naming another user would route their pushes here.
            return self.reply(403, {"error": "tag names another user"})
        handle = registration["Handle"]
        channel = handle if platform != "wns" or handle.startswith("http") else f"{state.pns}/wns/{quote(handle, safe='')}"
        installation = {
            "installationId": installation_id,
            "platform": platform,
            "pushChannel": channel,
            "tags": sorted(set(tags) | {own}),
        }
        if platform in SECURE_TEMPLATES:
            installation["templates"] = {"secure": {"body": SECURE_TEMPLATES[platform], "tags": ["secure"]}}
        state.client.create_or_update_installation(installation)
        with state.lock:
            state.by_handle[handle] = installation_id
        return self.reply(200)

    def delete(self, user, installation_id):
        state = self.state
        with state.lock:
            if state.owners.get(installation_id) != user:
                return self.reply(410, {"error": "gone"})
            del state.owners[installation_id]
        state.client.delete_installation(installation_id)
        return self.reply(200)

    # Sends: native to a tag expression, template for secure pushes.
    def plain(self, user, pns, to_tag, message):
        text = f"From {user}: {message}"
        expression = f"username:{to_tag} && !secure"
        if pns == "apns":
            notification = create_apple_notification(json.dumps({"aps": {"alert": text}}), headers={"apns-push-type": "alert"})
        elif pns in ("fcm", "gcm"):
            notification = create_fcm_v1_notification(json.dumps({"message": {"data": {"message": text}}}))
        elif pns == "wns":
            toast = f'<toast><visual><binding template="ToastText01"><text id="1">{xml_escape(text)}</text></binding></visual></toast>'
            notification = create_windows_toast_notification(toast)
        else:
            return self.reply(400, {"error": "pns"})
        self.state.client.send_notification(notification, tag_expression=expression)
        return self.reply(200, {"outcome": "Enqueued"})

    def secure(self, user, to_tag, payload):
        notification_id = str(uuid.uuid4())
        with self.state.lock:
            self.state.notifications[notification_id] = (to_tag, payload, False)
        client = self.state.client
        client.send_notification(create_template_notification({"secureId": notification_id}), tag_expression=f"username:{to_tag} && secure")
        client.send_notification(create_windows_raw_notification(notification_id), tag_expression=f"username:{to_tag}")
        return self.reply(200, {"outcome": "Enqueued", "id": notification_id})

    def read(self, user, notification_id):
        with self.state.lock:
            entry = self.state.notifications.get(notification_id)
            if entry is None or entry[0] != user:
                return self.reply(404, {"error": "not found"})
            recipient, payload, was_read = entry
            self.state.notifications[notification_id] = (recipient, payload, True)
        return self.reply(200, {"Id": notification_id, "Payload": payload, "Read": was_read})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    parser.add_argument("--connection-string", required=True)
    parser.add_argument("--hub-name", help="the hub (the portal's connection strings name none); else the string's EntityPath")
    parser.add_argument("--pns", required=True, help="the push service's base URL, for WNS channel URIs")
    args = parser.parse_args()
    hub_name = args.hub_name or dict(p.split("=", 1) for p in args.connection_string.split(";") if "=" in p)["EntityPath"]
    Handler.state = State(args.connection_string, hub_name, args.pns)
    host, port = args.listen.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    print(f"hub backend listening on {host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
