"""Checks a run against a backend instrumented with OpenTelemetry's auto-instrumentation alone
(traced_backend.py), from the spans both exported to one receiver, the run's incidents.csv and
the backend's own record of what it did with each send (its ground truth):

- the lost pairs are exactly the devices of the sends the backend dropped, and the late pairs
  exactly those of the sends it took the slow path for; nothing else went wrong;
- every lost pair's trace holds pushfleet's send span, the backend's server span as its child,
  and no request from the backend to the push service;
- every late pair's trace shows the backend span that took the time: its call to the directory,
  a child of its server span, most of the server span's length, before its pushes;
- pushfleet exported the traces of exactly those sends plus its sampled delivered pairs, and each
  sampled trace is whole: pushfleet's spans, the backend's server span, its pushes, and under
  each push the push service's span of it.

Prints one lost and one late trace as trees.
Usage: check_backend.py SPANS.jsonl REPORT_DIR TRUTH.jsonl PNS_PORT SLOW_SECONDS SAMPLE_SHARE"""
import csv
import json
import os
import sys

spans_path, report, truth_path, pns_port, slow, share = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6])
spans = [json.loads(line) for line in open(spans_path)]
rows = [r for r in csv.DictReader(line for line in open(os.path.join(report, "incidents.csv")) if not line.startswith("#"))]
truth = [json.loads(line) for line in open(truth_path)]
problems = []

SERVER, CLIENT = 2, 3
by_trace = {}
for span in spans:
    by_trace.setdefault(span["trace_id"], []).append(span)
    if span["service"] not in ("pushfleet", "pushfleet-push-service", "traced-backend"):
        problems.append("a span of an unknown service: %s" % span)


def url(span):
    attributes = span["attributes"]
    return str(attributes.get("url.full") or attributes.get("http.url") or "")


def seconds(span):
    return (span["end"] - span["start"]) / 1e9


def backend(tree, kind):
    return [s for s in tree if s["service"] == "traced-backend" and s["kind"] == kind]


def pushes(tree):
    return [s for s in backend(tree, CLIENT) if (":%s/" % pns_port) in url(s) and "accesstoken" not in url(s)]


def root_of(tree):
    roots = [s for s in tree if s["service"] == "pushfleet" and s["name"] == "send" and s["parent_span_id"] == ""]
    return roots[0] if len(roots) == 1 else None


def server_under(tree, root):
    servers = [s for s in backend(tree, SERVER) if s["parent_span_id"] == root["span_id"]]
    return servers[0] if len(servers) == 1 else None


def show(trace_id):
    tree = by_trace.get(trace_id, [])
    children = {}
    for span in tree:
        children.setdefault(span["parent_span_id"], []).append(span)
    ids = {s["span_id"] for s in tree}
    lines = []

    def walk(span, depth):
        lines.append("    %s%s%s [%s] %.1f ms%s" % ("  " * depth, span["name"], " " + url(span) if url(span) else "", span["service"],
                                                    seconds(span) * 1000, " (error)" if span["status"]["code"] == 2 else ""))
        for child in sorted(children.get(span["span_id"], []), key=lambda s: s["start"]):
            walk(child, depth + 1)

    for top in sorted((s for s in tree if s["parent_span_id"] not in ids), key=lambda s: s["start"]):
        walk(top, 0)
    return "\n".join(lines)


# What the run said went wrong, against what the backend did.
dropped = {t["trace_id"]: t for t in truth if t["outcome"] == "dropped" and t["devices"] > 0}
slowed = {t["trace_id"]: t for t in truth if t["outcome"] == "slow" and t["devices"] > 0}
if not dropped or not slowed:
    problems.append("the planted faults did not happen: %d dropped and %d slowed sends with devices" % (len(dropped), len(slowed)))
lost = [r for r in rows if r["outcome"] == "lost"]
late = [r for r in rows if r["outcome"] == "late"]
others = [r for r in rows if r["outcome"] not in ("lost", "late")]
if others:
    problems.append("incidents the backend did not plant: %s" % others[:3])
for name, found, planted in (("lost", lost, dropped), ("late", late, slowed)):
    if {r["trace_id"] for r in found} != set(planted):
        problems.append("%s traces %d, planted %d: %s" % (name, len({r["trace_id"] for r in found}), len(planted),
                                                           sorted({r["trace_id"] for r in found} ^ set(planted))[:4]))
    if len(found) != sum(t["devices"] for t in planted.values()):
        problems.append("%d %s pairs for %d devices of the planted sends" % (len(found), name, sum(t["devices"] for t in planted.values())))
if any(t["sent"] != t["devices"] for t in truth if t["outcome"] != "dropped"):
    problems.append("the push service refused a push: %s" % [t for t in truth if t["outcome"] != "dropped" and t["sent"] != t["devices"]][:3])

for trace_id in dropped:
    tree = by_trace.get(trace_id, [])
    root = root_of(tree)
    if root is None or server_under(tree, root) is None:
        problems.append("lost trace %s: no send span with the backend's server span under it\n%s" % (trace_id, show(trace_id)))
    elif pushes(tree):
        problems.append("lost trace %s holds a push\n%s" % (trace_id, show(trace_id)))
for trace_id in slowed:
    tree = by_trace.get(trace_id, [])
    root = root_of(tree)
    server = root and server_under(tree, root)
    if not server:
        problems.append("late trace %s: no send span with the backend's server span under it\n%s" % (trace_id, show(trace_id)))
        continue
    calls = [s for s in backend(tree, CLIENT) if "/profile/" in url(s) and s["parent_span_id"] == server["span_id"]]
    sent = pushes(tree)
    if len(calls) != 1 or seconds(calls[0]) < 0.9 * slow or seconds(calls[0]) < 0.8 * seconds(server):
        problems.append("late trace %s: the directory call is not what took the time\n%s" % (trace_id, show(trace_id)))
    elif not sent or min(s["start"] for s in sent) < calls[0]["end"]:
        problems.append("late trace %s: its pushes do not follow the slow call\n%s" % (trace_id, show(trace_id)))

# What pushfleet exported: the incidents' traces and its sample, nothing else, each whole.
exported = {s["trace_id"] for s in spans if s["service"] == "pushfleet"}
sampled = {s["trace_id"] for s in spans if s["service"] == "pushfleet" and s["name"] == "pair delivered"}
if not sampled:
    problems.append("no sampled delivery was exported")
if exported != set(dropped) | set(slowed) | sampled:
    problems.append("pushfleet exported %d traces; incidents %d and sample %d" % (len(exported), len(dropped) + len(slowed), len(sampled)))
# docs/tracing.md: a send is in the sample when its trace id's low 53 bits, as a fraction, fall
# under the share; worked out here from the ids the backend saw, not taken from pushfleet.
chosen = {t["trace_id"] for t in truth if t["outcome"] == "sent" and t["devices"] > 0
          and (int(t["trace_id"][16:], 16) >> 11) * 2.0 ** -53 < share}
if sampled != chosen:
    problems.append("sampled %d traces, the share picks %d: %s" % (len(sampled), len(chosen), sorted(sampled ^ chosen)[:4]))
for trace_id in sampled:
    tree = by_trace[trace_id]
    root = root_of(tree)
    if root is None or server_under(tree, root) is None or not pushes(tree):
        problems.append("sampled trace %s is not whole\n%s" % (trace_id, show(trace_id)))
        continue
    # Each delivered push's own path hangs under the backend's request that handed it over: the
    # span id its SDK drew at random, read back from the traceparent the push service was given.
    sent = {s["span_id"] for s in pushes(tree)}
    accepted = [s for s in tree if s["name"] == "push accepted"]
    pairs = [s for s in tree if s["name"] == "pair delivered"]
    if len(accepted) != len(pairs) or any(s["parent_span_id"] not in sent or s["service"] != "pushfleet-push-service" for s in accepted):
        problems.append("sampled trace %s: the push service's spans are not under the backend's pushes\n%s" % (trace_id, show(trace_id)))
    elif len({s["parent_span_id"] for s in accepted}) != len(accepted):
        problems.append("sampled trace %s: two pushes under one request\n%s" % (trace_id, show(trace_id)))
if problems:
    print("\n".join(problems[:12]))
    sys.exit(1)
print("  %d lost pairs of %d dropped sends and %d late pairs of %d slowed sends, as the backend planted them; %d sampled traces whole"
      % (len(lost), len(dropped), len(late), len(slowed), len(sampled)))
print("  a delivered push's trace %s:\n%s" % (next(iter(sampled)), show(next(iter(sampled)))))
print("  a lost push's trace %s:\n%s" % (next(iter(dropped)), show(next(iter(dropped)))))
print("  a late push's trace %s:\n%s" % (next(iter(slowed)), show(next(iter(slowed)))))
