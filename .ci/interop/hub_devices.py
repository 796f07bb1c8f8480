"""Tag expressions through the hub with a PyPI Notification Hubs client, counted per device.

Devices hold WebSockets to pushfleet's push service; the client installs each with random tags
(and a template), then sends native and template notifications to random tag expressions.
Every device must receive exactly the pushes whose expression its tags satisfy, judged by an
evaluator written here, apart from the hub's.

Usage: hub_devices.py --pns http://127.0.0.1:PORT --connection-string "Endpoint=…" --hub-name hub [--seed N]
"""
import argparse
import json
import random
import re
import sys
import threading
import time
import uuid

from azure_notification_hub import (
    NotificationHubsClient,
    create_apple_notification,
    create_fcm_v1_notification,
    create_template_notification,
    create_windows_toast_notification,
)
from websockets.sync.client import connect

TAGS = ["red", "blue", "green", "user:1", "user:2", "beta"]


def evaluate(expression, tags):
    """A tag expression as Python: && and, || or, ! not, tags as membership tests."""
    tokens = re.findall(r"&&|\|\||!|\(|\)|[A-Za-z0-9_@#.:-]+", expression)
    python = []
    for token in tokens:
        python.append({"&&": " and ", "||": " or ", "!": " not ", "(": "(", ")": ")"}.get(token, repr(token in tags)))
    return eval("".join(python))


def random_expression(rng, depth):
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(TAGS)
    kind = rng.random()
    if kind < 0.2:
        return "!" + wrap(random_expression(rng, depth - 1))
    op = " && " if kind < 0.6 else " || "
    return wrap(random_expression(rng, depth - 1)) + op + wrap(random_expression(rng, depth - 1))


def wrap(text):
    return text if re.fullmatch(r"!?[A-Za-z0-9_@#.:-]+", text) else f"({text})"


def within_limits(expression):
    count = len(re.findall(r"[A-Za-z0-9_@#.:-]+", expression))
    only_or = "&&" not in expression and "!" not in expression
    return count <= (20 if only_or else 6)


class Device:
    def __init__(self, pns, platform):
        self.platform = platform
        self.token = uuid.uuid4().hex * 2 if platform == "apns" else f"{platform}-{uuid.uuid4()}"
        ws = pns.replace("http://", "ws://")
        self.socket = connect(f"{ws}/device?platform={platform}&token={self.token}")
        self.pushes = []
        self.subscribed = threading.Event()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pns", required=True)
    parser.add_argument("--connection-string", required=True)
    parser.add_argument("--hub-name", help="the hub (the portal's connection strings name none); else the string's EntityPath")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sends", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    hub = args.hub_name or dict(p.split("=", 1) for p in args.connection_string.split(";") if "=" in p)["EntityPath"]
    client = NotificationHubsClient(args.connection_string, hub)

    devices = []
    for index in range(18):
        platform = ["apns", "fcmv1", "wns"][index % 3]
        device = Device(args.pns, {"fcmv1": "fcm"}.get(platform, platform))
        tags = sorted(t for t in TAGS if rng.random() < 0.45)
        channel = device.token if platform != "wns" else f"{args.pns}/wns/{device.token}"
        installation = {"installationId": f"dev-{index}", "platform": platform, "pushChannel": channel, "tags": tags}
        if platform != "wns":
            body = '{"aps":{"alert":"$(text)"}}' if platform == "apns" else '{"message":{"data":{"text":"$(text)"}}}'
            installation["templates"] = {"t": {"body": body}}
        client.create_or_update_installation(installation)
        device.tags = set(tags)
        devices.append(device)
    read_back = json.loads(client.get_installation("dev-0")["_raw_xml"])
    assert read_back["installationId"] == "dev-0", read_back

    expected = [0] * len(devices)
    excluded = 0  # (send, device) pairs of the right platform that the expression leaves out
    sent = {"native": 0, "template": 0}
    attempts = 0
    while sum(sent.values()) < args.sends and attempts < 10 * args.sends:
        attempts += 1
        expression = random_expression(rng, 3)
        if not within_limits(expression):
            continue
        kind = rng.choice(["apple", "fcmv1", "windows", "template"])
        text = f"n{sum(sent.values())}"
        if kind == "apple":
            notification = create_apple_notification(json.dumps({"aps": {"alert": text}}))
        elif kind == "fcmv1":
            notification = create_fcm_v1_notification(json.dumps({"message": {"data": {"text": text}}}))
        elif kind == "windows":
            notification = create_windows_toast_notification(f'<toast><visual><binding template="ToastText01"><text id="1">{text}</text></binding></visual></toast>')
        else:
            notification = create_template_notification({"text": text})
        client.send_notification(notification, tag_expression=expression)
        sent["template" if kind == "template" else "native"] += 1
        for index, device in enumerate(devices):
            platform_matches = (
                kind == "template" and device.platform != "wns"
                or kind == "apple" and device.platform == "apns"
                or kind == "fcmv1" and device.platform == "fcm"
                or kind == "windows" and device.platform == "wns"
            )
            if platform_matches and evaluate(expression, device.tags):
                expected[index] += 1
            elif platform_matches:
                excluded += 1

    deadline = time.time() + 10
    while time.time() < deadline and any(len(d.pushes) < e for d, e in zip(devices, expected)):
        time.sleep(0.05)
    time.sleep(0.3)
    received = [len(d.pushes) for d in devices]
    for device in devices:
        device.socket.close()
    print(f"sends: {sent['native']} native, {sent['template']} template; pushes expected {sum(expected)}, received {sum(received)}")
    for index, (device, want, got) in enumerate(zip(devices, expected, received)):
        print(f"  device {index:2d} {device.platform:4s} tags {sorted(device.tags)}: expected {want}, received {got}{'' if want == got else '  MISMATCH'}")
    print(f"pairs the expressions left out: {excluded}")
    if expected != received or sum(expected) == 0 or excluded == 0:
        print("FAILED: pushes did not reach exactly the devices the expressions select", file=sys.stderr)
        sys.exit(1)
    print("every push reached exactly the devices its tag expression selects")


if __name__ == "__main__":
    main()
