"""Web Push interop: PyPI's pywebpush (unmodified) sends to browsers subscribed at the mock push
service, reached by hosts entries over TLS, each subscription in its service's endpoint form.
The browsers are on the mock's gateway and decrypt with http_ece (pywebpush's own dependency,
an implementation no one here wrote); every message must arrive once, decrypted, to its browser.
A wrong VAPID key must be refused (403), no VAPID on a restricted subscription too (401), and an
unsubscribed endpoint must answer 410.

usage: webpush_browsers.py GATEWAY_WS BROWSERS_PER_SERVICE MESSAGES_PER_BROWSER
(REQUESTS_CA_BUNDLE must trust the mock's CA.)"""
import asyncio, base64, json, os, sys, time
import aiohttp, http_ece, requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid
from pywebpush import WebPushException, webpush

HOSTS = {
    "fcm": "fcm.googleapis.com",
    "mozilla": "updates.push.services.mozilla.com",
    "windows": "wns2-pf.notify.windows.com",
    "apple": "web.push.apple.com",
}


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def point(public_key):
    return public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


def parameter(header, name):
    for part in header.replace(",", ";").split(";"):
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == name:
            return value.strip().strip('"')
    return None


class Browser:
    def __init__(self, service, application_server_key):
        self.service = service
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)
        answer = requests.post(
            f"https://{HOSTS[service]}/webpush/subscriptions",
            json={"service": service, "applicationServerKey": application_server_key},
            timeout=10,
        )
        assert answer.status_code == 201, f"subscribe at {service}: {answer.status_code} {answer.text}"
        minted = answer.json()
        self.endpoint, self.token = minted["endpoint"], minted["token"]
        self.received = []
        self.undecryptable = 0

    def subscription(self):
        return {"endpoint": self.endpoint, "keys": {"p256dh": b64(point(self.key.public_key())), "auth": b64(self.auth)}}

    def decrypt(self, frame):
        headers = frame.get("webPush") or {}
        body = base64.b64decode(frame["body"])
        encoding = headers.get("contentEncoding")
        try:
            if encoding == "aes128gcm":
                plain = http_ece.decrypt(body, private_key=self.key, auth_secret=self.auth, version="aes128gcm")
            else:
                plain = http_ece.decrypt(
                    body, salt=unb64(parameter(headers["encryption"], "salt")), dh=unb64(parameter(headers["cryptoKey"], "dh")),
                    private_key=self.key, auth_secret=self.auth, version="aesgcm",
                )
            self.received.append(json.loads(plain))
        except Exception:
            self.undecryptable += 1


async def listen(session, gateway, browser, expected, ready, deadline):
    async with session.ws_connect(f"{gateway}/device?platform=webpush&token={browser.token}") as ws:
        async for message in ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            frame = json.loads(message.data)
            if frame.get("type") == "subscribed":
                ready.set()
            elif frame.get("type") == "push":
                browser.decrypt(frame)
            if len(browser.received) + browser.undecryptable >= expected or time.monotonic() > deadline:
                break


def send(browser, vapid, number, encoding):
    payload = json.dumps({"to": browser.token, "n": number, "encoding": encoding})
    webpush(
        browser.subscription(), data=payload, vapid_private_key=vapid, vapid_claims={"sub": "mailto:interop@example.com"},
        content_encoding=encoding, ttl=60,
    )


def refused_with(browser, vapid, claims=True):
    try:
        if claims:
            webpush(browser.subscription(), data="x", vapid_private_key=vapid, vapid_claims={"sub": "mailto:interop@example.com"}, ttl=60)
        else:
            webpush(browser.subscription(), data="x", ttl=60)
    except WebPushException as error:
        return error.response.status_code if error.response is not None else None
    return 201


async def main(gateway, per_service, messages):
    vapid, stranger = Vapid(), Vapid()
    vapid.generate_keys()
    stranger.generate_keys()
    key = b64(point(vapid.public_key))
    browsers = [Browser(service, key) for service in HOSTS for _ in range(per_service)]
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as session:
        readies = [asyncio.Event() for _ in browsers]
        listeners = [asyncio.create_task(listen(session, gateway, b, messages, r, deadline)) for b, r in zip(browsers, readies)]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 20)
        started = time.monotonic()
        for number in range(messages):
            for browser in browsers:
                encoding = "aes128gcm" if number % 2 == 0 else "aesgcm"
                await asyncio.to_thread(send, browser, vapid, number, encoding)
        sent_in = time.monotonic() - started
        await asyncio.wait_for(asyncio.gather(*listeners), 60)
    failures = []
    for browser in browsers:
        numbers = sorted(m["n"] for m in browser.received)
        if numbers != list(range(messages)) or any(m["to"] != browser.token for m in browser.received) or browser.undecryptable:
            failures.append(f"{browser.service} {browser.token[:8]}: got {numbers}, undecryptable {browser.undecryptable}")
    total = sum(len(b.received) for b in browsers)
    print(f"webpush interop: {total}/{len(browsers) * messages} messages from pywebpush decrypted by {len(browsers)} browsers "
          f"({', '.join(HOSTS)}; aes128gcm and aesgcm) in {sent_in:.1f} s")
    probe = browsers[0]
    checks = {
        "another VAPID key": (refused_with(probe, stranger), 403),
        "no VAPID on a restricted subscription": (refused_with(probe, None, claims=False), 401),
    }
    assert requests.delete(f"https://{HOSTS[probe.service]}/webpush/subscriptions/{probe.token}", timeout=10).status_code == 204
    checks["an unsubscribed endpoint"] = (refused_with(probe, vapid), 410)
    for name, (got, want) in checks.items():
        print(f"  {name}: {got} (want {want})")
        if got != want:
            failures.append(f"{name}: {got}, want {want}")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)


asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
