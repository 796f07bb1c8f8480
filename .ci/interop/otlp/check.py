"""Checks the spans a run exported against its incidents.csv: one root `send` span per send an
incident names, under the trace id the row gives, with no parent; one `pair <outcome>` span per
incident row, a child of its send's span, with status error and the row's outcome, hop and
reason; every id well formed; the resource names the service; the headers were sent. And the
sample of delivered pairs: each a `pair delivered` span (status ok) under its send's root, its
`hop …` children one after another from the send's start to the pair's end, and the push's own
path: the push service's span (its own service) under the span its provider request named, the
device's receipt under that. Each pair lost at the push service: the push service's span of its
push, named by its latest step, under the backend's request for it. And the reference backend's own spans (pushfleet-backend): its
server span of each send under pushfleet's send span, each push's client span the push service's
parent, its server span of each fetch under the device's fetch span."""
import csv
import json
import sys

spans_path, incidents_path = sys.argv[1], sys.argv[2]
spans = [json.loads(line) for line in open(spans_path)]
rows = [r for r in csv.DictReader(line for line in open(incidents_path) if not line.startswith("#"))]
problems = []
rows_with_send = [r for r in rows if r["send"]]
if not rows_with_send:
    problems.append("the run had no incident with a send: nothing to check")
by_trace = {}
for span in spans:
    by_trace.setdefault(span["trace_id"], []).append(span)
    if len(span["trace_id"]) != 32 or set(span["trace_id"]) == {"0"} or len(span["span_id"]) != 16:
        problems.append("malformed ids: %s" % span)
    if span["service"] not in ("pushfleet", "pushfleet-push-service", "pushfleet-backend") or span["scope"] != "pushfleet":
        problems.append("service/scope: %s" % span)
    if (span["service"] == "pushfleet-push-service") != (span["name"].startswith("push ") and span["name"] != "push received"):
        problems.append("a span under the wrong service: %s" % span)
    if span["authorization"] != "Bearer ci-token":
        problems.append("OTEL_EXPORTER_OTLP_HEADERS not sent: %s" % span["authorization"])
    if span["end"] < span["start"] or span["start"] < 1.6e18:
        problems.append("times: %s" % span)
def backend_server(tree, root):
    """The reference backend's server span of the send, a child of pushfleet's send span."""
    servers = [s for s in tree if s["service"] == "pushfleet-backend" and s["kind"] == 2 and s["parent_span_id"] == root["span_id"]]
    return servers[0] if len(servers) == 1 else None


for row in rows_with_send:
    trace = row["trace_id"]
    tree = [s for s in by_trace.get(trace, []) if s["service"] != "pushfleet-backend"]
    roots = [s for s in tree if s["name"] == "send"]
    if len(roots) != 1 or roots[0]["parent_span_id"] != "" or roots[0]["kind"] != 3:
        problems.append("send %s: roots %s" % (row["send"], roots))
        continue
    root = roots[0]
    if backend_server(by_trace[trace], root) is None:
        problems.append("send %s: no reference backend server span under it" % row["send"])
    if root["attributes"].get("pushfleet.send.id") != int(row["send"]):
        problems.append("send %s: root names send %s" % (row["send"], root["attributes"].get("pushfleet.send.id")))
    pairs = [s for s in tree if s["name"] == "pair " + row["outcome"] and s["attributes"].get("pushfleet.device") == (int(row["device"]) if row["device"] else None)]
    if not pairs:
        problems.append("send %s device %s: no pair span for %s" % (row["send"], row["device"], row["outcome"]))
        continue
    for pair in pairs:
        if pair["parent_span_id"] != root["span_id"] or pair["status"]["code"] != 2:
            problems.append("pair span not a failed child of its send: %s" % pair)
        if row["hop"] and pair["attributes"].get("pushfleet.hop") != row["hop"]:
            problems.append("hop %s vs %s" % (pair["attributes"].get("pushfleet.hop"), row["hop"]))
incident_traces = {r["trace_id"] for r in rows_with_send}
incident_spans = [s for s in spans if s["trace_id"] in incident_traces and s["service"] == "pushfleet" and (s["name"] == "send" or (s["name"].startswith("pair ") and s["name"] != "pair delivered"))]
expected = len(rows_with_send) + len({r["send"] for r in rows_with_send})
if len(incident_spans) != expected:
    problems.append("%d spans for %d incident rows naming %d sends (expected %d)" % (len(incident_spans), len(rows_with_send), len({r["send"] for r in rows_with_send}), expected))
delivered = [s for s in spans if s["name"] == "pair delivered"]
pushed = 0
if not delivered:
    problems.append("no sampled delivery was exported")
for pair in delivered:
    tree = by_trace[pair["trace_id"]]
    roots = [s for s in tree if s["name"] == "send" and s["parent_span_id"] == ""]
    if len(roots) != 1 or pair["parent_span_id"] != roots[0]["span_id"] or pair["status"]["code"] != 1:
        problems.append("delivered pair not an ok child of its send: %s" % pair)
        continue
    hops = sorted((s for s in tree if s["parent_span_id"] == pair["span_id"]), key=lambda s: s["start"])
    if not hops or not all(h["name"].startswith("hop ") for h in hops):
        problems.append("delivered pair without hops: %s" % pair)
        continue
    if hops[0]["start"] != roots[0]["start"] or any(a["end"] != b["start"] for a, b in zip(hops, hops[1:])) or hops[-1]["end"] != pair["end"]:
        problems.append("hops do not follow one another from the send to the pair's end: %s" % [(h["name"], h["start"], h["end"]) for h in hops])
    # The push's own path: the push service's span under the span its provider request named
    # (the reference backend's client span of the push, under its server span of the send), the
    # device's receipt under it, then the fetch (secure and rich pushes).
    device = pair["attributes"]["pushfleet.device"]
    pushes = [s for s in tree if s["name"] == "push accepted" and s["attributes"].get("pushfleet.device") == device]
    server = backend_server(tree, roots[0])
    clients = {s["span_id"] for s in tree if server and s["service"] == "pushfleet-backend" and s["kind"] == 3 and s["parent_span_id"] == server["span_id"]}
    if len(pushes) != 1 or pushes[0]["parent_span_id"] not in clients or pushes[0]["kind"] != 2:
        problems.append("delivered pair without its push service span under the backend's request: %s" % pushes)
        continue
    fetches = [s for s in tree if s["name"] == "fetch" and s["service"] == "pushfleet"]
    for fetch in fetches:
        if not any(s["service"] == "pushfleet-backend" and s["kind"] == 2 and s["parent_span_id"] == fetch["span_id"] for s in tree):
            problems.append("a device's fetch without the backend's server span under it: %s" % fetch)
    receipts = [s for s in tree if s["name"] == "push received" and s["parent_span_id"] == pushes[0]["span_id"]]
    service_hop = next((h for h in hops if h["name"] == "hop push_service"), None)
    if len(receipts) != 1 or service_hop is None or (pushes[0]["start"], pushes[0]["end"]) != (service_hop["start"], service_hop["end"]):
        problems.append("the push's path disagrees with its hops: %s %s" % (pushes, receipts))
    pushed += 1
# The push service's part of each incident at the push service (a dropped push, faults.yaml's):
# one span of the push service for the pair, named by the push's latest step, failed, under the
# reference backend's client span of that push in the send's trace (the backend hands the send's
# context on), or in a trace of its own linked to the send.
service_parts = 0
for row in rows_with_send:
    if row["hop"] != "push_service" or row["outcome"] != "lost":
        continue
    device = int(row["device"]) if row["device"] else None
    parts = [
        s for s in spans
        if s["service"] == "pushfleet-push-service" and s["attributes"].get("pushfleet.device") == device
        and s["attributes"].get("pushfleet.outcome") == "lost"
        and (s["trace_id"] == row["trace_id"] or any(l["trace_id"] == row["trace_id"] for l in s["links"]))
    ]
    if len(parts) != 1:
        problems.append("lost at the push service, send %s device %s: %d push service spans" % (row["send"], row["device"], len(parts)))
        continue
    part = parts[0]
    step = part["attributes"].get("pushfleet.push.step")
    if part["name"] != "push " + str(step).replace("_", " ") or part["status"]["code"] != 2 or part["kind"] != 2:
        problems.append("push service span of a lost pair: %s" % part)
    if part["trace_id"] == row["trace_id"]:
        clients = {s["span_id"] for s in by_trace[row["trace_id"]] if s["service"] == "pushfleet-backend" and s["kind"] == 3}
        if part["parent_span_id"] not in clients:
            problems.append("push service span not under the backend's request for the push: %s" % part)
    elif part["parent_span_id"] != "":
        problems.append("a linked push service span with a parent: %s" % part)
    service_parts += 1
if not service_parts:
    problems.append("no pair lost at the push service had the push service's span (faults.yaml drops pushes)")
if problems:
    print("\n".join(problems[:20]))
    sys.exit(1)
print("  %d spans: %d incidents of %d sends, every tree as incidents.csv names it; %d sampled deliveries, each hop after hop, %d with the push service's span under the backend's request; %d pairs lost at the push service, each with its span"
      % (len(spans), len(rows_with_send), len({r["send"] for r in rows_with_send}), len(delivered), pushed, service_parts))
