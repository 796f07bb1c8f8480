"""A seed-contract AppBackend (plain sends to WNS) instrumented with OpenTelemetry's own
auto-instrumentation only: started under `opentelemetry-instrument`, Flask's instrumentation
makes a server span of each request (a child of the caller's traceparent) and requests' a client
span of each call out, which hands the trace on. Nothing here creates a span.

Two planted faults, and the ground truth of each send written to --truth (one JSON line a send):
- users whose number is 1 mod 6: the send is answered 200 and nothing is pushed (lost);
- users whose number is 4 mod 6: the directory the backend asks for the user's profile answers
  after --slow seconds (late).
Every send asks the directory (an uninstrumented server in this process) before it pushes.
"""
import argparse
import base64
import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

import requests
from flask import Flask, abort, request
from opentelemetry import trace

app = Flask(__name__)
lock = threading.Lock()
registrations = {}  # id -> {"user", "platform", "handle"}
ids = itertools.count(1)
settings = {}
token = {"value": None}


def user_number(user):
    match = re.search(r"(\d+)$", user)
    return int(match.group(1)) if match else 0


def caller():
    header = request.headers.get("Authorization", "")
    if not header.startswith("Basic "):
        abort(401)
    try:
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    except Exception:
        abort(401)
    if not user or user != password:
        abort(401)
    return user


@app.post("/api/register")
def create_registration():
    user = caller()
    with lock:
        registration = "r%d" % next(ids)
        registrations[registration] = {"user": user, "platform": None, "handle": request.args.get("handle")}
    return json.dumps(registration), 200, {"Content-Type": "application/json"}


@app.put("/api/register/<registration>")
def update_registration(registration):
    user = caller()
    body = request.get_json(force=True, silent=True) or {}
    if body.get("Platform") != "wns" or not str(body.get("Handle", "")).startswith(("http://", "https://")):
        abort(400)
    with lock:
        entry = registrations.get(registration)
        if entry is None or entry["user"] != user:
            abort(410)
        entry.update(platform="wns", handle=body["Handle"])
    return "", 200


@app.delete("/api/register/<registration>")
def delete_registration(registration):
    user = caller()
    with lock:
        entry = registrations.get(registration)
        if entry is None or entry["user"] != user:
            abort(404)
        del registrations[registration]
    return "", 200


def wns_token():
    if token["value"] is None:
        form = {"grant_type": "client_credentials", "client_id": "ms-app://s-1-15-2-otlp", "client_secret": "otlp-secret",
                "scope": "notify.windows.com"}
        answer = requests.post(settings["wns_access_url"], data=form, timeout=10)
        answer.raise_for_status()
        token["value"] = answer.json()["access_token"]
    return token["value"]


@app.post("/api/notifications")
def notify():
    caller()
    to = request.args.get("to_tag", "")
    text = request.get_json(force=True, silent=True)
    if not isinstance(text, str) or request.args.get("pns") != "wns":
        abort(400)
    number = user_number(to)
    outcome = "dropped" if number % 6 == 1 else "slow" if number % 6 == 4 else "sent"
    # The profile look-up every send makes; the planted slow path is the directory's.
    requests.get("http://127.0.0.1:%d/profile/%s" % (settings["directory_port"], to),
                 params={"slow": "1"} if outcome == "slow" else None, timeout=30).raise_for_status()
    with lock:
        handles = [r["handle"] for r in registrations.values() if r["user"] == to and r["platform"] == "wns"]
    sent = 0
    if outcome != "dropped":
        toast = '<toast><visual><binding template="ToastText01"><text id="1">%s</text></binding></visual></toast>' % escape(text)
        for handle in handles:
            answer = requests.post(handle, data=toast.encode(), timeout=10, headers={
                "Authorization": "Bearer " + wns_token(), "X-WNS-Type": "wns/toast", "Content-Type": "text/xml"})
            if answer.status_code == 200:
                sent += 1
    context = trace.get_current_span().get_span_context()
    with lock, open(settings["truth"], "a") as out:
        out.write(json.dumps({"trace_id": "%032x" % context.trace_id, "to": to, "outcome": outcome,
                              "devices": len(handles), "sent": sent}) + "\n")
    return json.dumps({"targets": len(handles), "accepted": sent}), 200, {"Content-Type": "application/json"}


class Directory(BaseHTTPRequestHandler):
    def do_GET(self):
        if "slow=1" in self.path:
            time.sleep(settings["slow"])
        body = b'{"profile":"ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen-port", type=int, required=True)
    parser.add_argument("--wns-access-url", required=True)
    parser.add_argument("--truth", required=True)
    parser.add_argument("--slow", type=float, default=2.0)
    args = parser.parse_args()
    directory = ThreadingHTTPServer(("127.0.0.1", 0), Directory)
    threading.Thread(target=directory.serve_forever, daemon=True).start()
    settings.update(wns_access_url=args.wns_access_url, truth=args.truth, slow=args.slow,
                    directory_port=directory.server_address[1])
    app.run(host="127.0.0.1", port=args.listen_port, threaded=True)


if __name__ == "__main__":
    main()
