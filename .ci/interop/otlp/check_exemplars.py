"""Checks a live OpenMetrics scrape of a run (`Accept: application/openmetrics-text`) with the
Prometheus project's own OpenMetrics parser (prometheus_client, from PyPI), which refuses text
that breaks the format: a missing `# EOF`, a counter family named with `_total`, a malformed
exemplar. Then the delivery and hop histograms' exemplars: at least one on delivery and on the
backend, push service and device hops; each names a trace id (32 hex
digits, not all zero) alone, holds a latency inside its bucket, and, given the spans the run
exported, names a trace the run exported whole (a `send` root and its pair)."""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

scrape_path = sys.argv[1]
spans_path = sys.argv[2] if len(sys.argv) > 2 else None
text = open(scrape_path).read()
families = list(text_string_to_metric_families(text))
problems = []
names = {f.name for f in families}
for expected in ("pushfleet_sends", "pushfleet_pushes_received", "pushfleet_operation_duration_seconds"):
    if expected not in names:
        problems.append("no family %s (families: %s)" % (expected, sorted(names)))
exemplars = []
bounds = {}
for family in families:
    if family.name != "pushfleet_operation_duration_seconds":
        continue
    if family.type != "histogram":
        problems.append("%s is a %s" % (family.name, family.type))
    for sample in family.samples:
        if not sample.name.endswith("_bucket"):
            if sample.exemplar is not None:
                problems.append("an exemplar off a bucket: %s" % (sample,))
            continue
        operation = sample.labels["operation"]
        le = float(sample.labels["le"])
        lower = bounds.get(operation, 0.0)
        bounds[operation] = le
        if sample.exemplar is None:
            continue
        if operation != "delivery" and not operation.startswith("hop."):
            problems.append("an exemplar on %s: %s" % (operation, sample))
        exemplar = sample.exemplar
        trace = exemplar.labels.get("trace_id", "")
        if set(exemplar.labels) != {"trace_id"} or len(trace) != 32 or set(trace) - set("0123456789abcdef") or set(trace) == {"0"}:
            problems.append("exemplar labels: %s" % (exemplar.labels,))
        if not (lower < exemplar.value <= le) and not (lower == 0.0 and exemplar.value == 0.0):
            problems.append("exemplar %s outside its bucket (%s, %s]" % (exemplar.value, lower, le))
        if exemplar.timestamp is None or float(exemplar.timestamp) < 1.6e9:
            problems.append("exemplar timestamp: %s" % (exemplar.timestamp,))
        exemplars.append((operation, le, trace))
for operation in ("delivery", "hop.backend", "hop.push_service", "hop.device"):
    if not any(op == operation for op, _, _ in exemplars):
        problems.append("no exemplar on the %s histogram" % operation)
if spans_path:
    spans = [json.loads(line) for line in open(spans_path)]
    sends = {s["trace_id"] for s in spans if s["name"] == "send" and s["service"] == "pushfleet"}
    pairs = {s["trace_id"] for s in spans if s["name"].startswith("pair ") and s["service"] == "pushfleet"}
    for operation, le, trace in exemplars:
        if trace not in sends or trace not in pairs:
            problems.append("exemplar of %s le=%s names trace %s, which the run did not export whole" % (operation, le, trace))
if problems:
    print("exemplars: %d problems" % len(problems))
    for problem in problems[:20]:
        print("  " + problem)
    sys.exit(1)
print("exemplars: %d on the delivery and hop histograms, OpenMetrics text accepted by prometheus_client%s"
      % (len(exemplars), ", each a trace the run exported" if spans_path else ""))
