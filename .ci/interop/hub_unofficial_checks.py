"""The hub's fidelity through azure-notification-hub-unofficial's own API (installations and
sends; it has no call that creates a registration): WNS channel URIs in WNS's own form,
upper-case APNs tokens, and the reserved tags, each answer as the REST reference documents it.

Usage: hub_unofficial_checks.py --pns http://127.0.0.1:PORT --connection-string "Endpoint=…" --hub-name hub
"""
import argparse
import json
import threading
import time
import uuid

from azure_notification_hub import (
    AzureNHError,
    NotificationHubsClient,
    create_apple_notification,
    create_windows_toast_notification,
)
from websockets.sync.client import connect

failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what, flush=True)
    if not condition:
        failures.append(what)


class Device:
    def __init__(self, pns, platform, token):
        self.socket = connect(f"{pns.replace('http://', 'ws://')}/device?platform={platform}&token={token}")
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


def refused(call):
    """The AzureNHError a call raised, or None."""
    try:
        call()
    except AzureNHError as error:
        return error
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pns", required=True)
    parser.add_argument("--connection-string", required=True)
    parser.add_argument("--hub-name", required=True)
    args = parser.parse_args()
    client = NotificationHubsClient(args.connection_string, args.hub_name)
    toast = '<toast><visual><binding template="ToastText01"><text id="1">hi</text></binding></visual></toast>'

    # WNS's own channel URI forms, as a Windows device hands them to its backend.
    for form in ["https://db5.notify.windows.com/w/?token={}", "https://wns2-by3p.notify.windows.com/?token={}"]:
        token = f"wns-{uuid.uuid4()}"
        device = Device(args.pns, "wns", token)
        channel = form.format(token)
        client.create_or_update_installation({"installationId": token, "platform": "wns", "pushChannel": channel})
        client.send_notification(create_windows_toast_notification(toast), tag_expression=f"$InstallationId:{{{token}}}")
        check(device.wait(1) == 1, f"a WNS installation at {channel.split('?')[0]}?token=… received {len(device.pushes)} of 1")

    # An APNs token in upper case.
    token = uuid.uuid4().hex * 2
    device = Device(args.pns, "apns", token)
    client.create_or_update_installation({"installationId": "upper", "platform": "apns", "pushChannel": token.upper(), "tags": ["upper"]})
    client.send_notification(create_apple_notification({"aps": {"alert": "x"}}), tag_expression="upper")
    check(device.wait(1) == 1, f"an APNs installation in upper-case hex received {len(device.pushes)} of 1")

    # Reserved tags: 400 with the service's error body, the installation unchanged.
    victim = uuid.uuid4().hex * 2
    victim_device = Device(args.pns, "apns", victim)
    client.create_or_update_installation({"installationId": "victim", "platform": "apns", "pushChannel": victim, "userId": "alice"})
    thief = uuid.uuid4().hex * 2
    thief_device = Device(args.pns, "apns", thief)
    error = refused(lambda: client.create_or_update_installation(
        {"installationId": "thief", "platform": "apns", "pushChannel": thief, "tags": ["$InstallationId:{victim}"]}
    ))
    check(error is not None and error.status_code == 400 and "Tags can not start with $" in error.body, f"reserved tag in an installation: {error}")
    client.create_or_update_installation({"installationId": "thief", "platform": "apns", "pushChannel": thief})
    error = refused(lambda: client.update_installation("thief", [{"op": "add", "path": "/tags", "value": "$UserId:{alice}"}]))
    check(error is not None and error.status_code == 400 and "Tags can not start with $" in error.body, f"reserved tag in a JSON Patch add: {error}")
    client.send_notification(create_apple_notification({"aps": {"alert": "for alice"}}), tag_expression="$UserId:{alice}")
    check(victim_device.wait(1) == 1 and not thief_device.pushes, "a send to $UserId:{alice} reaches the victim alone")

    if failures:
        raise SystemExit(f"{len(failures)} check(s) failed: {failures}")
    print("azure-notification-hub-unofficial: every check passed", flush=True)


if __name__ == "__main__":
    main()
