"""The hub as Microsoft's own Python sample reaches it: notificationhubs-rest-python (PyPI), the
REST wrapper Microsoft's Python tutorial points to, plus raw REST requests shaped as Microsoft's
REST reference shows them. Run inside a namespace where the hub's host name and a WNS host
resolve to the mock, over TLS on :443, trusting the mock's CA through REQUESTS_CA_BUNDLE.

The wrapper takes the connection string as the portal prints it (exactly three parts, the hub's
name apart) and always speaks https to the namespace's host. Each check names the answer the
reference documents: status, headers, and the service's <Error><Code>…</Code><Detail>… body.

Usage: hub_rest_python.py --connection-string "Endpoint=sb://…/;SharedAccessKeyName=…;SharedAccessKey=…"
                          --hub-name NAME --pns http://127.0.0.1:PORT --wns-host db5.notify.windows.com
"""
import argparse
import base64
import hashlib
import hmac
import json
import threading
import time
import urllib.parse
import uuid

import requests
from notificationhubs_rest_python.NotificationHub import AzureNotificationHub
from websockets.sync.client import connect

ATOM = "http://www.w3.org/2005/Atom"
HUB_NS = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
API = "api-version=2015-01"
failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what, flush=True)
    if not condition:
        failures.append(what)


class Device:
    def __init__(self, pns, platform, token):
        self.token = token
        self.socket = connect(f"{pns.replace('http://', 'ws://')}/device?platform={platform}&token={urllib.parse.quote(token, safe='')}")
        self.pushes = []
        self.subscribed = threading.Event()
        threading.Thread(target=self.read, daemon=True).start()
        if not self.subscribed.wait(10):
            raise RuntimeError("device not confirmed online")

    def read(self):
        try:
            for message in self.socket:
                frame = json.loads(message)
                if frame.get("type") == "subscribed":
                    self.subscribed.set()
                elif frame.get("type") == "push":
                    self.pushes.append(frame["body"])
        except Exception:
            pass

    def wait(self, count, seconds=5):
        deadline = time.time() + seconds
        while len(self.pushes) < count and time.time() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        return len(self.pushes)


class Rest:
    """Requests as the REST reference shows them, signed as its SAS example does."""

    def __init__(self, connection_string, hub):
        fields = dict(part.split("=", 1) for part in connection_string.split(";"))
        self.base = "https://" + fields["Endpoint"][len("sb://"):].rstrip("/") + "/" + hub
        self.key_name, self.key = fields["SharedAccessKeyName"], fields["SharedAccessKey"]

    def token(self):
        uri = urllib.parse.quote(self.base, safe="").lower()
        expiry = str(int(time.time()) + 300)
        signature = base64.b64encode(hmac.new(self.key.encode(), f"{uri}\n{expiry}".encode(), hashlib.sha256).digest())
        return f"SharedAccessSignature sr={uri}&sig={urllib.parse.quote(signature)}&se={expiry}&skn={self.key_name}"

    def __call__(self, method, path, body=None, content_type="application/atom+xml;type=entry;charset=utf-8", headers=None):
        all_headers = {"Authorization": self.token(), "x-ms-version": "2015-01", "Content-Type": content_type}
        all_headers.update(headers or {})
        separator = "&" if "?" in path else "?"
        return requests.request(method, f"{self.base}/{path}{separator}{API}", data=body, headers=all_headers, timeout=20)


def entry(element, handle_element, handle, tags):
    return (
        f'<?xml version="1.0" encoding="utf-8"?><entry xmlns="{ATOM}"><content type="application/xml">'
        f'<{element} xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="{HUB_NS}">'
        f"<Tags>{tags}</Tags><{handle_element}>{handle}</{handle_element}></{element}></content></entry>"
    )


def service_error(response, status):
    return response.status_code == status and response.text.startswith(f"<Error><Code>{status}</Code><Detail>") and "TrackingId:" in response.text


def utf16(text):
    return b"\xff\xfe" + text.encode("utf-16-le")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--connection-string", required=True)
    parser.add_argument("--hub-name", required=True)
    parser.add_argument("--pns", required=True)
    parser.add_argument("--wns-host", required=True)
    parser.add_argument("--load", metavar="READY", help="only register 300 devices, create READY, and send until the hub goes away")
    args = parser.parse_args()
    if args.load:
        return load(args)

    # The portal's three-part string, parsed by the wrapper's own splitter; https by host name.
    hub = AzureNotificationHub(args.connection_string, args.hub_name)
    check(True, "the wrapper took the printed connection string (exactly three parts) and the hub name")
    rest = Rest(args.connection_string, args.hub_name)
    created = rest("POST", "registrationids", content_type="application/xml")
    check(created.status_code == 201 and "/registrationids/" in created.headers.get("Location", ""), f"POST registrationids over TLS by host name: {created.status_code}")

    # WNS channel URIs in WNS's own form, as the push service mints them over TLS.
    wns_token = f"wns-{uuid.uuid4()}"
    windows = Device(args.pns, "wns", wns_token)
    minted = requests.post(f"https://{args.wns_host}/wns/channels?token={wns_token}", timeout=10).json()["channelUri"]
    check(minted.startswith(f"https://{args.wns_host}/w/?token="), f"minted channel {minted}")
    put = rest("PUT", "registrations/wns-own-form", entry("WindowsRegistrationDescription", "ChannelUri", minted, "wnsform"))
    check(put.status_code == 200, f"PUT a Windows registration with {minted}: {put.status_code}")
    toast = '<toast><visual><binding template="ToastText01"><text id="1">hi</text></binding></visual></toast>'
    status, _ = hub.send_windows_notification(False, toast, tags="wnsform")
    check(status == 201, "send_windows_notification to its tag: 201")
    status, _ = hub.send_windows_notification(True, toast, device_handle=minted)
    check(status == 201, "send_windows_notification direct to the channel URI: 201")
    check(windows.wait(2) == 2, f"the WNS device received {len(windows.pushes)} of 2")

    # APNs tokens registered in upper case.
    apple_token = uuid.uuid4().hex * 2
    apple = Device(args.pns, "apns", apple_token)
    put = rest("PUT", "registrations/apple-upper", entry("AppleRegistrationDescription", "DeviceToken", apple_token.upper(), "upper"))
    check(put.status_code == 200, f"PUT an Apple registration in upper-case hex: {put.status_code}")
    status, _ = hub.send_apple_notification(False, {"aps": {"alert": "tagged"}}, tags="upper")
    check(status == 201, "send_apple_notification to its tag: 201")
    status, _ = hub.send_apple_notification(True, {"aps": {"alert": "direct"}}, device_handle=apple_token.upper())
    check(status == 201, "send_apple_notification direct to the upper-case token: 201")
    check(apple.wait(2) == 2, f"the APNs device received {len(apple.pushes)} of 2")

    # Registration XML that is not well-formed, a DTD in UTF-16, wrong namespaces: 400.
    good = entry("AppleRegistrationDescription", "DeviceToken", "ab" * 32, "t")
    bad = {
        "end tags cut off": good[: good.index("</AppleRegistrationDescription>")],
        "text after the root": good + "junk",
        "an undeclared prefix": good.replace("<Tags>t</Tags>", "<x:Tags>t</x:Tags>"),
        "entry outside the Atom namespace": good.replace(f'xmlns="{ATOM}"', 'xmlns="urn:x"'),
        "description outside the hub namespace": good.replace(f'xmlns="{HUB_NS}"', 'xmlns="urn:x"'),
    }
    for index, (what, body) in enumerate(bad.items()):
        response = rest("PUT", f"registrations/bad-{index}", body)
        check(service_error(response, 400), f"{what}: {response.status_code} {response.text[:80]}")
    dtd = '<?xml version="1.0" encoding="utf-16"?><!DOCTYPE entry [<!ENTITY a "aaaa">]>' + good.split("?>", 1)[1].replace("<Tags>t<", "<Tags>&a;<")
    response = rest("PUT", "registrations/dtd16", utf16(dtd))
    check(service_error(response, 400), f"a DOCTYPE in UTF-16: {response.status_code} {response.text[:80]}")
    check(rest("GET", "registrations/dtd16").status_code == 404, "the UTF-16 DOCTYPE registration was not stored")

    # Reserved tags: 400 "Tags can not start with $", wherever a registration or installation takes tags.
    victim_token = uuid.uuid4().hex * 2
    victim = Device(args.pns, "apns", victim_token)
    installation = {"installationId": "victim", "platform": "apns", "pushChannel": victim_token, "userId": "alice"}
    check(rest("PUT", "installations/victim", json.dumps(installation), "application/json").status_code == 200, "PUT the victim's installation")
    thief = uuid.uuid4().hex * 2
    answers = {
        "registration tags": rest("PUT", "registrations/thief", entry("AppleRegistrationDescription", "DeviceToken", thief, "$InstallationId:{victim}")),
        "installation tags": rest(
            "PUT", "installations/thief", json.dumps({"installationId": "thief", "platform": "apns", "pushChannel": thief, "tags": ["$UserId:{alice}"]}), "application/json"
        ),
    }
    rest("PUT", "installations/thief2", json.dumps({"installationId": "thief2", "platform": "apns", "pushChannel": thief}), "application/json")
    answers["JSON-Patch tag add"] = rest(
        "PATCH", "installations/thief2", json.dumps([{"op": "add", "path": "/tags", "value": "$InstallationId:{victim}"}]), "application/json-patch+json"
    )
    for what, response in answers.items():
        check(service_error(response, 400) and "Tags can not start with $" in response.text, f"reserved tag in {what}: {response.status_code} {response.text[:70]}")
    status, _ = hub.send_apple_notification(False, {"aps": {"alert": "for alice"}}, tags="$UserId:{alice}")
    check(status == 201 and victim.wait(1) == 1, "a send to $UserId:{alice} reaches the victim")

    if failures:
        raise SystemExit(f"{len(failures)} check(s) failed: {failures}")
    print("notificationhubs-rest-python: every check passed", flush=True)


def load(args):
    """Sends through the wrapper from 8 threads until the hub stops answering."""
    hub = AzureNotificationHub(args.connection_string, args.hub_name)
    rest = Rest(args.connection_string, args.hub_name)
    for index in range(300):
        rest("PUT", f"registrations/load-{index}", entry("AppleRegistrationDescription", "DeviceToken", uuid.uuid4().hex * 2, "load"))
    open(args.load, "w").close()

    def sends():
        while True:
            try:
                hub.send_apple_notification(False, {"aps": {"alert": "x"}}, tags="load")
            except Exception:
                return

    threads = [threading.Thread(target=sends, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
