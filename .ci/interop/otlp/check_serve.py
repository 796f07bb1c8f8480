"""Checks the traces of a run against pushfleet's own servers, the reference backend sending
through the notification hub, from the spans the run and the servers exported to one receiver
(decoded by the OpenTelemetry project's own classes in receiver.py):

- every delivered pair the run sampled (all of them: tracing.sample 100%) has a whole trace:
  pushfleet's send → the backend's server span → its client span to the hub → the hub's server
  span → a hub client span per push → the push service's `push accepted` → the device's fetch →
  the backend's server span of the fetch; each child inside its trace, each parent present;
- every backend and hub span has a parent span in the receiver, or is the child of a device's
  own request (login, register), whose trace pushfleet does not export;
- MODE `serve`: the servers exported exactly as many spans as `pushfleet serve` said it did, and
  spans of traces the run did not export too (a server without a ledger exports what its callers
  sampled); MODE `embedded`: the servers' spans are only those of the traces the run exported
  (the ledger decides: tail sampling).

Prints one push's trace as a tree.
Usage: check_serve.py SPANS.jsonl MODE [SERVE_STDERR]"""
import json
import re
import sys

spans_path, mode = sys.argv[1], sys.argv[2]
spans = [json.loads(line) for line in open(spans_path)]
problems = []
SERVER, CLIENT = 2, 3
SKEW = 1_000_000  # ns
FLEET, PUSH, BACKEND, HUB = "pushfleet", "pushfleet-push-service", "pushfleet-backend", "pushfleet-hub"

by_id = {}
by_trace = {}
for span in spans:
    key = (span["trace_id"], span["span_id"])
    if key in by_id:
        problems.append("span %s exported twice" % (key,))
    by_id[key] = span
    by_trace.setdefault(span["trace_id"], []).append(span)
    if span["service"] not in (FLEET, PUSH, BACKEND, HUB):
        problems.append("a span of an unknown service: %s" % span["service"])


def children(span, service=None, kind=None, name=None):
    return [s for s in by_trace[span["trace_id"]] if s["parent_span_id"] == span["span_id"]
            and (service is None or s["service"] == service) and (kind is None or s["kind"] == kind)
            and (name is None or s["name"] == name)]


def one(found, what, pair):
    if len(found) != 1:
        problems.append("%s: %d %s, not one" % (pair, len(found), what))
        return None
    return found[0]


sends = [s for s in spans if s["service"] == FLEET and s["name"] == "send" and s["parent_span_id"] == ""]
pairs = [s for s in spans if s["service"] == FLEET and s["name"] == "pair delivered"]
if not pairs:
    problems.append("no sampled delivered pair exported")
whole = 0
example = None
for pair in pairs:
    label = "pair of trace %s" % pair["trace_id"]
    send = by_id.get((pair["trace_id"], pair["parent_span_id"]))
    if send is None or send["name"] != "send":
        problems.append("%s: no send span above it" % label)
        continue
    server = one(children(send, BACKEND, SERVER), "backend server spans under the send", label)
    if server is None:
        continue
    # One request to the hub per platform the recipient's devices are on.
    to_hub = [c for c in children(server, BACKEND, CLIENT) if "/messages" in str(c["attributes"].get("url.full", ""))]
    hubs = [h for c in to_hub for h in children(c, HUB, SERVER)]
    if not to_hub or len(hubs) != len(to_hub):
        problems.append("%s: %d backend requests to the hub, %d hub server spans under them" % (label, len(to_hub), len(hubs)))
        continue
    hub_pushes = [p for h in hubs for p in children(h, HUB, CLIENT)]
    device = pair["attributes"].get("pushfleet.device")
    accepted = [a for p in hub_pushes for a in children(p, PUSH, name="push accepted") if a["attributes"].get("pushfleet.device") in (None, device)]
    if not hub_pushes or not accepted:
        problems.append("%s: the push service's span hangs under none of the hub's %d pushes" % (label, len(hub_pushes)))
        continue
    fetches = [f for f in by_trace[pair["trace_id"]] if f["service"] == FLEET and f["name"] == "fetch"]
    fetch_servers = [c for f in fetches for c in children(f, BACKEND, SERVER)]
    if not fetches or not fetch_servers:
        problems.append("%s: no fetch with the backend's server span under it (%d fetches)" % (label, len(fetches)))
        continue
    # Across processes the run places its send by its own clock (its wall origin plus monotonic
    # time) and serve by the wall clock: a few hundred microseconds apart at most.
    for span in [server] + to_hub + hubs + hub_pushes + fetch_servers:
        if not (send["start"] - SKEW <= span["start"] <= span["end"]):
            problems.append("%s: %s %s starts before its send or ends before it starts" % (label, span["service"], span["name"]))
    whole += 1
    example = example or pair

servers = [s for s in spans if s["service"] in (BACKEND, HUB)]
exported_traces = {s["trace_id"] for s in sends}
for span in servers:
    parent = by_id.get((span["trace_id"], span["parent_span_id"]))
    if parent is None and not (span["service"] == BACKEND and span["kind"] == SERVER and span["trace_id"] not in exported_traces):
        problems.append("%s span %s (%s) has no parent in the receiver" % (span["service"], span["name"], span["span_id"]))
if not any(s["service"] == HUB for s in servers):
    problems.append("no span of the hub's")
outside = [s for s in servers if s["trace_id"] not in exported_traces]
if mode == "embedded" and outside:
    problems.append("%d server spans of traces the run did not export (tail sampling lets none through)" % len(outside))
if mode == "serve":
    said = re.search(r"traces: (\d+) spans of the backend and the hub exported", open(sys.argv[3]).read())
    if not said:
        problems.append("serve said nothing of its export")
    elif int(said.group(1)) != len(servers):
        problems.append("serve said it exported %s spans; the receiver holds %d" % (said.group(1), len(servers)))
    if not outside:
        problems.append("serve exported only the run's traces: the devices' own requests are missing")

if problems:
    print("check_serve (%s): %d problems" % (mode, len(problems)))
    for problem in problems[:20]:
        print("  " + problem)
    sys.exit(1)


def tree(span, depth):
    print("  %s%s %s (%.2f ms)" % ("  " * depth, span["service"], span["name"], (span["end"] - span["start"]) / 1e6))
    for child in sorted(children(span), key=lambda s: s["start"]):
        tree(child, depth + 1)


print("check_serve (%s): %d sampled pairs, each trace whole through backend, hub, push service, device and fetch; %d server spans%s"
      % (mode, whole, len(servers), ", %d of traces the run did not export" % len(outside) if mode == "serve" else ", only of exported traces"))
tree(by_id[(example["trace_id"], example["parent_span_id"])], 0)
