#!/usr/bin/env python3
"""A small push backend, standard library only, for the network-fault interop test.

Devices log in (any user whose password is the user name), register their APNs or FCM token,
and are sent plain notifications; every send is answered 202 at once and fans out to one push
per registered device of the recipient, which a pool of worker threads delivers to the mock push
service over HTTP/1.1 (APNs `POST /3/device/<token>`, FCM HTTP v1 `messages:send`).

Each worker keeps one persistent connection to the push service, as a provider client keeps its
HTTP/2 connection to APNs, and replaces it after a failure. A failed attempt (timeout,
connection error, or an answer that is not 2xx) has its socket closed abortively (SO_LINGER
{1, 0}: the kernel sends RST and drops whatever it still had queued), so a request that timed
out during a partition is never delivered behind the backend's back once the link heals: the
backend's own counts (`GET /stats`) stay exact. An attempt whose request went out whole and
whose answer never came (the read timed out) is counted `unanswered`: the push service may
have taken it, and a retry then delivers the push twice.

  --mode noretry   one attempt per push; a failed attempt is a lost push (`failed`)
  --mode retry     a failed attempt is sent again after --retry-gap, up to --retries times, as a
                   plain resend (no apns-id or message id a server could deduplicate on)

Usage:
  python3 push_backend.py --listen-port 8091 --pns http://127.0.0.1:8092 --mode retry

Provider credentials: the mock push service checks them as the real services do, but without a
configured key (`pushfleet run` with `pns: embedded` configures none) it checks their structure
and claims only, not signatures (docs/mock-push.md, "Provider authentication"). The standard
library signs neither ES256 nor RS256, so this backend presents well-formed tokens whose
signatures are random bytes of the right size: an ES256 provider token for APNs, and for FCM a
service-account assertion exchanged for an access token at the mock's `POST /token`.
"""

import argparse
import base64
import heapq
import http.client
import itertools
import json
import os
import queue
import secrets
import socket
import struct
import sys
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PLATFORMS = ("apns", "fcm")


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jwt(header, claims, signature_size):
    """A JWT whose signature is random bytes: the mock checks structure and claims only."""
    head = b64url(json.dumps(header, separators=(",", ":")).encode())
    body = b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{head}.{body}.{b64url(os.urandom(signature_size))}"


class Stats:
    """The backend's own counts, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.accepted_sends = 0
        self.pushes = 0
        self.delivered = 0
        self.failed = 0
        self.attempts = 0
        self.retried = 0
        self.unanswered = 0

    def add(self, **deltas):
        with self.lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)

    def snapshot(self):
        with self.lock:
            return {
                "accepted_sends": self.accepted_sends,
                "pushes": self.pushes,
                "delivered": self.delivered,
                "failed": self.failed,
                "attempts": self.attempts,
                "retried": self.retried,
                "unanswered": self.unanswered,
                "queued": self.pushes - self.delivered - self.failed,
            }


class Registry:
    """Sessions and devices, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sessions = {}  # bearer token -> user
        self.devices = {}  # device id -> {"user", "platform", "token"}
        self.by_token = {}  # (platform, push token) -> device id
        self.ids = itertools.count(1)

    def login(self, user):
        token = secrets.token_urlsafe(24)
        with self.lock:
            self.sessions[token] = user
        return token

    def user_of(self, bearer):
        with self.lock:
            return self.sessions.get(bearer)

    def register(self, user, platform, push_token):
        """Registers a device; the same push token again is a renewal (its id, possibly a new
        owner). Returns (id, created)."""
        with self.lock:
            known = self.by_token.get((platform, push_token))
            if known is not None:
                self.devices[known]["user"] = user
                return known, False
            device_id = next(self.ids)
            self.devices[device_id] = {"user": user, "platform": platform, "token": push_token}
            self.by_token[(platform, push_token)] = device_id
            return device_id, True

    def unregister(self, user, device_id):
        """True when the user's device was removed; None when it is another user's."""
        with self.lock:
            device = self.devices.get(device_id)
            if device is None:
                return False
            if device["user"] != user:
                return None
            del self.devices[device_id]
            self.by_token.pop((device["platform"], device["token"]), None)
            return True

    def devices_of(self, user):
        with self.lock:
            return [(d["platform"], d["token"]) for d in self.devices.values() if d["user"] == user]


class Push:
    __slots__ = ("platform", "token", "message", "attempts")

    def __init__(self, platform, token, message):
        self.platform = platform
        self.token = token
        self.message = message
        self.attempts = 0


class Credentials:
    """The provider credentials: one APNs provider token renewed every 50 minutes, and an FCM
    access token fetched from the push service when needed (through the same link, so a
    partition can fail it too: then the attempt fails)."""

    def __init__(self, sender):
        self.sender = sender
        self.lock = threading.Lock()
        self.apns_token = None
        self.apns_issued = 0
        self.fcm_token = None
        self.fcm_expires = 0.0

    def apns(self):
        now = int(time.time())
        with self.lock:
            if self.apns_token is None or now - self.apns_issued > 50 * 60:
                self.apns_issued = now
                self.apns_token = jwt(
                    {"alg": "ES256", "kid": self.sender.args.apns_key_id},
                    {"iss": self.sender.args.apns_team_id, "iat": now},
                    64,  # r‖s, 32 bytes each
                )
            return self.apns_token

    def drop_apns(self):
        with self.lock:
            self.apns_token = None

    def fcm(self):
        """The cached access token, or a new one from the token endpoint; None when that failed."""
        with self.lock:
            if self.fcm_token is not None and time.time() < self.fcm_expires:
                return self.fcm_token
        args = self.sender.args
        now = int(time.time())
        assertion = jwt(
            {"alg": "RS256", "typ": "JWT"},
            {
                "iss": f"pushfleet-interop@{args.fcm_project}.iam.gserviceaccount.com",
                "scope": "https://www.googleapis.com/auth/firebase.messaging",
                "aud": "https://oauth2.googleapis.com/token",
                "iat": now,
                "exp": now + 3600,
            },
            256,
        )
        form = urllib.parse.urlencode(
            {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion}
        ).encode()
        answer = self.sender.post("/token", form, {"Content-Type": "application/x-www-form-urlencoded"})
        if answer is None or not 200 <= answer[0] < 300:
            return None
        try:
            granted = json.loads(answer[1])
            token = granted["access_token"]
            lifetime = float(granted.get("expires_in", 3599))
        except (ValueError, KeyError, TypeError):
            return None
        with self.lock:
            self.fcm_token = token
            self.fcm_expires = time.time() + max(1.0, lifetime - 60)
        return token

    def drop_fcm(self, token):
        with self.lock:
            if self.fcm_token == token:
                self.fcm_token = None


class Sender:
    """Delivers pushes: a queue, worker threads, and a timer thread that puts retries back on
    the queue when their gap has passed."""

    def __init__(self, args, stats):
        self.args = args
        self.stats = stats
        url = urllib.parse.urlsplit(args.pns)
        if url.scheme != "http" or not url.hostname:
            raise SystemExit(f"--pns must be an http:// URL, not {args.pns!r}")
        self.host = url.hostname
        self.port = url.port or 80
        self.source = (args.source_address, 0) if args.source_address else None
        self.credentials = Credentials(self)
        self.jobs = queue.Queue()
        self.timer_lock = threading.Condition()
        self.timers = []  # (due, sequence, push)
        self.sequence = itertools.count()
        self.local = threading.local()  # each worker's persistent connection

    def start(self):
        for n in range(self.args.workers):
            threading.Thread(target=self.work, name=f"push-worker-{n}", daemon=True).start()
        threading.Thread(target=self.tick, name="push-retries", daemon=True).start()

    def enqueue(self, push):
        self.jobs.put(push)

    def later(self, push, delay):
        with self.timer_lock:
            heapq.heappush(self.timers, (time.monotonic() + delay, next(self.sequence), push))
            self.timer_lock.notify()

    def tick(self):
        while True:
            with self.timer_lock:
                while not self.timers:
                    self.timer_lock.wait()
                due, _, push = self.timers[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self.timer_lock.wait(wait)
                    continue
                heapq.heappop(self.timers)
            self.jobs.put(push)

    def work(self):
        while True:
            push = self.jobs.get()
            try:
                self.deliver(push)
            except Exception:  # never lose a worker, nor a push's outcome
                traceback.print_exc(file=sys.stderr)
                self.stats.add(failed=1)

    def deliver(self, push):
        push.attempts += 1
        self.stats.add(attempts=1)
        try:
            ok = self.attempt(push)
        except Exception:
            traceback.print_exc(file=sys.stderr)
            ok = False
        if ok:
            self.stats.add(delivered=1)
        elif self.args.mode == "retry" and push.attempts <= self.args.retries:
            if push.attempts == 1:
                self.stats.add(retried=1)
            self.later(push, self.args.retry_gap)
        else:
            self.stats.add(failed=1)

    def attempt(self, push):
        """One attempt: True when the push service answered 2xx."""
        if push.platform == "apns":
            body = json.dumps({"aps": {"alert": {"body": push.message}}}).encode()
            answer = self.post(
                "/3/device/" + urllib.parse.quote(push.token, safe=""),
                body,
                {
                    "Content-Type": "application/json",
                    "authorization": "bearer " + self.credentials.apns(),
                    "apns-topic": self.args.apns_topic,
                    "apns-push-type": "alert",
                    "apns-priority": "10",
                },
            )
            if answer is not None and answer[0] == 403 and b"ProviderToken" in answer[1]:
                self.credentials.drop_apns()
        else:
            access = self.credentials.fcm()
            if access is None:
                return False
            body = json.dumps({"message": {"token": push.token, "data": {"text": push.message}}}).encode()
            answer = self.post(
                f"/v1/projects/{urllib.parse.quote(self.args.fcm_project, safe='')}/messages:send",
                body,
                {"Content-Type": "application/json", "Authorization": "Bearer " + access},
            )
            if answer is not None and answer[0] == 401:
                self.credentials.drop_fcm(access)
        return answer is not None and 200 <= answer[0] < 300

    def post(self, path, body, headers):
        """POSTs on this worker's persistent connection (a new one if it has none): (status,
        body), or None on a timeout or connection error. A failed exchange (None, or an answer
        that is not 2xx) resets the connection; the next attempt opens another."""
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = http.client.HTTPConnection(
                self.host, self.port, timeout=self.args.timeout, source_address=self.source
            )
            try:
                connection.connect()
            except OSError:
                self.abort(connection, None)
                return None
            self.local.connection = connection
        response = None
        sent = False
        try:
            connection.request("POST", path, body=body, headers=headers)
            sent = True
            response = connection.getresponse()
            data = response.read()
            status = response.status
        except (OSError, http.client.HTTPException, ValueError) as error:
            # Written whole and never answered in time: the service may have taken it. A reset
            # or a close (a connection the service let go while idle) says it did not.
            if sent and isinstance(error, TimeoutError):
                self.stats.add(unanswered=1)
            self.local.connection = None
            self.abort(connection, response)
            return None
        except BaseException:
            self.local.connection = None
            self.abort(connection, response)
            raise
        if not 200 <= status < 300:
            self.local.connection = None
            self.abort(connection, response)
        elif response.will_close:
            self.local.connection = None
            connection.close()
        return status, data

    @staticmethod
    def abort(connection, response):
        """Closes with RST: SO_LINGER {on, 0 s} makes close() discard the send queue rather
        than retransmit it after a partition heals. The descriptor closes when its last user
        does (the response's file, then the connection's socket), so both are closed here."""
        sock = connection.sock
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        for closing in (response, connection):
            if closing is not None:
                try:
                    closing.close()
                except Exception:
                    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pushfleet-interop-backend"
    sys_version = ""

    def log_message(self, format, *args):
        pass

    # Answers

    def answer(self, status, payload=None):
        body = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        if payload is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, message):
        self.answer(status, {"error": message})

    # Requests

    def body_json(self):
        """The request's JSON object; None (after answering 400) when it is not one."""
        length = self.headers.get("Content-Length")
        try:
            size = int(length) if length is not None else 0
        except ValueError:
            size = -1
        if size < 0 or size > 1 << 20:
            self.close_connection = True
            self.error(400, "bad Content-Length")
            return None
        raw = self.rfile.read(size) if size else b""
        try:
            value = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            self.error(400, "the body must be JSON")
            return None
        if not isinstance(value, dict):
            self.error(400, "the body must be a JSON object")
            return None
        return value

    def drain(self):
        """Reads and drops a body this request does not use, so the connection stays usable."""
        try:
            size = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            size = 0
        if 0 < size <= 1 << 20:
            self.rfile.read(size)
        elif size:
            self.close_connection = True

    def user(self):
        """The logged-in user; None (after answering 401) when there is none."""
        auth = self.headers.get("Authorization") or ""
        scheme, _, credentials = auth.partition(" ")
        user = self.server.registry.user_of(credentials.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            self.error(401, "log in first")
        return user

    def route(self):
        path = urllib.parse.urlsplit(self.path).path
        method = self.command
        if method == "POST" and path == "/login":
            return self.login()
        if method == "POST" and path == "/devices":
            return self.register()
        if method == "DELETE" and path.startswith("/devices/"):
            return self.unregister(path[len("/devices/"):])
        if method == "POST" and path == "/send":
            return self.send()
        if method == "GET" and path == "/stats":
            self.drain()
            return self.answer(200, self.server.stats.snapshot())
        if method == "GET" and path == "/health":
            self.drain()
            return self.answer(200, {"ok": True})
        self.drain()
        self.error(404, "no such endpoint")

    def login(self):
        body = self.body_json()
        if body is None:
            return
        user, password = body.get("user"), body.get("password")
        if not isinstance(user, str) or not user or password != user:
            return self.error(401, "wrong user or password")
        self.answer(200, {"token": self.server.registry.login(user)})

    def user_and_body(self):
        """The logged-in user and the request's JSON object; None once answered otherwise."""
        user = self.user()
        if user is None:
            self.drain()
            return None
        body = self.body_json()
        return None if body is None else (user, body)

    def register(self):
        found = self.user_and_body()
        if found is None:
            return
        user, body = found
        platform, token = body.get("platform"), body.get("token")
        if platform not in PLATFORMS:
            return self.error(400, "platform must be apns or fcm")
        if not isinstance(token, str) or not token:
            return self.error(400, "token must be a non-empty string")
        device_id, created = self.server.registry.register(user, platform, token)
        self.answer(201 if created else 200, {"id": device_id})

    def unregister(self, text):
        user = self.user()
        self.drain()
        if user is None:
            return
        try:
            device_id = int(text)
        except ValueError:
            return self.error(404, "no such device")
        removed = self.server.registry.unregister(user, device_id)
        if removed is None:
            return self.error(403, "another user's device")
        if not removed:
            return self.error(404, "no such device")
        self.answer(204)

    def send(self):
        found = self.user_and_body()
        if found is None:
            return
        _, body = found
        to, message = body.get("to"), body.get("message")
        if not isinstance(to, str) or not to or not isinstance(message, str):
            return self.error(400, "to and message must be strings")
        devices = self.server.registry.devices_of(to)
        self.server.stats.add(accepted_sends=1, pushes=len(devices))
        for platform, token in devices:
            self.server.sender.enqueue(Push(platform, token, message))
        self.answer(202, {"pushes": len(devices)})

    def handle_one(self):
        try:
            self.route()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:
            traceback.print_exc(file=sys.stderr)
            self.close_connection = True
            try:
                self.error(500, "internal error")
            except Exception:
                pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = handle_one


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a client that went away mid-request; nothing to log


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen-port", type=int, required=True)
    parser.add_argument("--listen-host", default="127.0.0.1")
    parser.add_argument("--pns", required=True, help="the mock push service, http://HOST:PORT")
    parser.add_argument("--mode", choices=["noretry", "retry"], required=True)
    parser.add_argument("--timeout", type=float, default=0.5, help="seconds per connect and per read (default 0.5)")
    parser.add_argument("--retries", type=int, default=20, help="retries of a failed attempt in retry mode (default 20)")
    parser.add_argument("--retry-gap", type=float, default=0.25, help="seconds before a retry (default 0.25)")
    parser.add_argument("--workers", type=int, default=64, help="delivery threads (default 64)")
    parser.add_argument("--source-address", help="local address the push connections bind to (default: any)")
    parser.add_argument("--apns-topic", default="com.example.pushfleet")
    parser.add_argument("--apns-key-id", default="PFKEY00001")
    parser.add_argument("--apns-team-id", default="PFTEAM0001")
    parser.add_argument("--fcm-project", default="pf-interop")
    args = parser.parse_args()
    if args.timeout <= 0 or args.retries < 0 or args.retry_gap < 0 or args.workers < 1:
        parser.error("--timeout must be positive, --retries and --retry-gap not negative, --workers at least 1")

    stats = Stats()
    sender = Sender(args, stats)
    sender.start()
    server = Server((args.listen_host, args.listen_port), Handler)
    server.registry = Registry()
    server.stats = stats
    server.sender = sender
    print(
        f"push backend on http://{args.listen_host}:{args.listen_port}, pushing to {args.pns}, mode {args.mode}",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
