"""A seed-contract AppBackend that sends with real push libraries, unmodified: aioapns (APNs,
token auth, HTTP/2 over TLS), firebase-admin (FCM HTTP v1 with a service-account JSON) and
pywebpush (Web Push to a browser's subscription, encrypted and VAPID-signed with py_vapid's key);
WNS as Microsoft documents it, with aiohttp: a client-credentials token from
login.live.com/accesstoken.srf, then a toast POSTed to the channel URI the device registered.

Neither library can be told another host: they reach pushfleet's mock push service only through
a hosts entry and the CA trust (SSL_CERT_FILE, REQUESTS_CA_BUNDLE) that the caller sets up.
Implements what a plain-send scenario uses: Basic auth (user == password), register, update,
delete, GET /api/webpush/vapid and POST /api/notifications?pns=apns|fcm|wns|webpush&to_tag=U.
"""
import argparse
import asyncio
import base64
import json
import uuid
from xml.sax.saxutils import escape

import aiohttp

import firebase_admin
from aiohttp import web
from aioapns import APNs, NotificationRequest, PushType
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from firebase_admin import credentials, messaging
from py_vapid import Vapid01
from pywebpush import webpush

registrations = {}  # id -> {"platform", "handle", "tags"}
state = {"apns": None, "fcm_app": None, "vapid": None, "wns_token": None, "sent": {"apns": 0, "fcm": 0, "wns": 0, "webpush": 0}, "failed": []}
PLATFORMS = ("apns", "fcm", "wns", "webpush")


def caller(request):
    header = request.headers.get("Authorization", "")
    if not header.startswith("Basic "):
        raise web.HTTPUnauthorized()
    try:
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    except Exception:
        raise web.HTTPUnauthorized()
    if not user or user != password:
        raise web.HTTPUnauthorized()
    return user


async def create_registration(request):
    caller(request)
    handle = request.query.get("handle")
    if handle:
        same = [rid for rid, reg in registrations.items() if reg["handle"] == handle]
        if same:
            for extra in same[1:]:
                registrations.pop(extra, None)
            return web.json_response(same[0])
    rid = uuid.uuid4().hex
    registrations[rid] = {"platform": None, "handle": handle, "tags": []}
    return web.json_response(rid)


async def update_registration(request):
    user = caller(request)
    rid = request.match_info["id"]
    if rid not in registrations:
        raise web.HTTPGone()
    body = await request.json()
    platform = body.get("Platform")
    if platform not in PLATFORMS:
        raise web.HTTPBadRequest(text="this backend sends to apns, fcm, wns and webpush only")
    if platform == "wns" and not (body.get("Handle") or "").startswith(("http://", "https://")):
        raise web.HTTPBadRequest(text="a wns Handle is the channel URI")
    if platform == "webpush":
        try:
            subscription = json.loads(body.get("Handle") or "")
            assert subscription["endpoint"] and subscription["keys"]["p256dh"] and subscription["keys"]["auth"]
        except Exception:
            raise web.HTTPBadRequest(text="a webpush Handle is the subscription's JSON")
    tags = [t for t in body.get("Tags") or [] if not t.startswith("username:")]
    registrations[rid] = {"platform": platform, "handle": body.get("Handle"), "tags": tags + [f"username:{user}"]}
    return web.Response(status=200)


async def delete_registration(request):
    caller(request)
    registrations.pop(request.match_info["id"], None)
    return web.Response(status=200)


async def send_apns(handle, text):
    result = await state["apns"].send_notification(
        NotificationRequest(device_token=handle, message={"aps": {"alert": text}}, push_type=PushType.ALERT)
    )
    if not result.is_successful:
        raise RuntimeError(f"APNs {result.status} {result.description}")


async def send_fcm(handle, text):
    message = messaging.Message(token=handle, data={"message": text})
    await asyncio.get_running_loop().run_in_executor(None, lambda: messaging.send(message, app=state["fcm_app"]))


async def wns_token(session):
    if state["wns_token"] is None:
        form = {"grant_type": "client_credentials", "client_id": "ms-app://s-1-15-2-interop", "client_secret": "interop-secret",
                "scope": "notify.windows.com"}
        async with session.post("https://login.live.com/accesstoken.srf", data=form) as answer:
            if answer.status != 200:
                raise RuntimeError(f"WNS OAuth {answer.status} {await answer.text()}")
            state["wns_token"] = (await answer.json())["access_token"]
    return state["wns_token"]


async def send_wns(handle, text):
    toast = f'<toast><visual><binding template="ToastText01"><text id="1">{escape(text)}</text></binding></visual></toast>'
    async with aiohttp.ClientSession() as session:
        headers = {"Authorization": f"Bearer {await wns_token(session)}", "X-WNS-Type": "wns/toast", "Content-Type": "text/xml"}
        async with session.post(handle, data=toast.encode(), headers=headers) as answer:
            if answer.status != 200:
                raise RuntimeError(f"WNS {answer.status} {answer.headers.get('X-WNS-Error-Description', '')}")


def send_webpush_sync(handle, text):
    webpush(subscription_info=json.loads(handle), data=text, vapid_private_key=state["vapid"],
            vapid_claims={"sub": "mailto:interop@pushfleet.invalid"}, ttl=600)


async def send_webpush(handle, text):
    await asyncio.get_running_loop().run_in_executor(None, lambda: send_webpush_sync(handle, text))


async def vapid_key(request):
    point = state["vapid"].public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    return web.json_response({"publicKey": base64.urlsafe_b64encode(point).decode().rstrip("=")})


async def notify(request):
    user = caller(request)
    pns = request.query.get("pns")
    to = request.query.get("to_tag")
    if pns not in PLATFORMS or not to:
        raise web.HTTPBadRequest()
    message = await request.json()
    text = f"From {user}: {message}"
    targets = [r["handle"] for r in registrations.values() if r["platform"] == pns and f"username:{to}" in r["tags"]]
    send = {"apns": send_apns, "fcm": send_fcm, "wns": send_wns, "webpush": send_webpush}[pns]
    results = await asyncio.gather(*(send(handle, text) for handle in targets), return_exceptions=True)
    errors = [r for r in results if isinstance(r, Exception)]
    state["sent"][pns] += len(results) - len(errors)
    if errors:
        state["failed"].extend(str(e) for e in errors[:5])
        return web.Response(status=500, text=str(errors[0]))
    return web.Response(status=200)


async def stats(request):
    return web.json_response(state["sent"] | {"failed": state["failed"][:20]})


async def health(request):
    return web.Response(text="ok")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen-port", type=int, required=True)
    parser.add_argument("--apns-key", required=True)
    parser.add_argument("--apns-key-id", required=True)
    parser.add_argument("--apns-team-id", required=True)
    parser.add_argument("--apns-topic", required=True)
    parser.add_argument("--service-account", required=True)
    args = parser.parse_args()

    async def start(app):
        # The libraries' own defaults: production APNs host, default SSL context, no ALPN set.
        # aioapns 4 takes the .p8 key's text.
        with open(args.apns_key) as key:
            state["apns"] = APNs(key=key.read(), key_id=args.apns_key_id, team_id=args.apns_team_id, topic=args.apns_topic)
        state["fcm_app"] = firebase_admin.initialize_app(credentials.Certificate(args.service_account))
        state["vapid"] = Vapid01()
        state["vapid"].generate_keys()

    app = web.Application()
    app.on_startup.append(start)
    app.add_routes([
        web.post("/api/register", create_registration),
        web.put("/api/register/{id}", update_registration),
        web.delete("/api/register/{id}", delete_registration),
        web.post("/api/notifications", notify),
        web.get("/api/webpush/vapid", vapid_key),
        web.get("/stats", stats),
        web.get("/health", health),
    ])
    web.run_app(app, host="127.0.0.1", port=args.listen_port, print=None)


if __name__ == "__main__":
    main()
