#!/usr/bin/env bash
# Runs inside fresh network and mount namespaces (see .ci/interop-backends): its own loopback, and
# an /etc/hosts of its own that sends Google's hosts to the mock push service, whose CA the
# backend trusts through REQUESTS_CA_BUNDLE. Nothing here reaches outside the namespace.
# Runs `api check` and the fleet (JWT logins, then session cookies), which must pass; then the fleet against a copy of fcm-django with a
# planted bug (a user's last device is left out of every send), which must fail with exactly the
# pushes the bug dropped counted lost.
set -euo pipefail
pf=$1 venv=$2 work=$3 here=$4
py="$venv/bin/python"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
source "$here/../django.sh"

ip link set lo up
cp /etc/hosts "$work/hosts"
echo "127.0.0.1 fcm.googleapis.com oauth2.googleapis.com" >>"$work/hosts"
mount --bind "$work/hosts" /etc/hosts

# A service account as Google hands it out; the mock verifies the OAuth assertions it signs.
bash "$here/../service-account.sh" "$work" pushfleet-fcm-django "$py"

"$pf" serve --backend-listen 127.0.0.1:8080 --pns-listen 127.0.0.1:8090 --pns-tls-listen 127.0.0.1:443 \
  --tls-ca-out "$work/ca.pem" --fcm-service-account "$work/service-account.json" --log-level warning \
  >"$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q "^device gateway" "$work/serve.log" && break; sleep 0.2; done
bundle=$(sed -n 's/^CA bundle (system CAs + this CA): //p' "$work/serve.log")
test -s "$bundle" || { cat "$work/serve.log" >&2; echo "serve printed no CA bundle" >&2; exit 1; }

export PFFCM_SERVICE_ACCOUNT="$work/service-account.json"
export DJANGO_SETTINGS_MODULE=pffcm.settings SSL_CERT_FILE="$bundle" REQUESTS_CA_BUNDLE="$bundle"

start_backend() { # $1: state folder, $2: extra PYTHONPATH (a patched copy)
  export PFFCM_STATE=$1 PYTHONPATH="${2:+$2:}$here"
  mkdir -p "$PFFCM_STATE"
  "$py" -m django migrate --run-syncdb -v 0
  "$py" -m django shell -v 0 -c "
from django.contrib.auth.models import User
for i in range(1, 25):
    User.objects.create_user(f'user{i}', password=f'user{i}')
"
  "$py" -m django runserver 127.0.0.1:8082 --noreload >"$PFFCM_STATE/backend.log" 2>&1 &
  pids+=($!)
  wait_django 8082 /api/token/ 405 fcm-django "$PFFCM_STATE/backend.log"
}

stop_backend() { stop_django 8082; }

headline() {
  "$py" - "$1" <<'PY'
import csv, sys, os
d = sys.argv[1]
s = dict(csv.reader(open(os.path.join(d, "summary.csv"))))
print("  result %s: sends %s, expected %s, delivered %s, lost %s, misdelivered %s, duplicates %s, indeterminate %s"
      % (s["result"], s["sends"], s["expected"], s["delivered"], s["lost"], s["misdelivered"], s["duplicates"], s["indeterminate"]))
PY
}

echo "== fcm-django $("$py" -c 'import importlib.metadata as m; print(m.version("fcm-django"))') with firebase-admin $("$py" -c 'import importlib.metadata as m; print(m.version("firebase-admin"))') (FCM over TLS, DRF device endpoints, SimpleJWT login)"
start_backend "$work/state"
echo "== api check: one user, two devices, every step"
"$pf" api check "$here/scenario.yaml" >"$work/api-check.out" 2>&1 || { cat "$work/api-check.out"; tail -30 "$work/state/backend.log" >&2; exit 1; }
sed -n '/^== steps/,$p' "$work/api-check.out"

echo "== the fleet"
status=0
"$pf" run "$here/scenario.yaml" --quiet --out "$work/report" >"$work/run.out" 2>&1 || status=$?
headline "$work/report"
grep -E '^(http\.unregister|http\.fetch_secure|http\.register),' "$work/report/operations.csv" | cut -d, -f1-4 | sed 's/^/  /' || true
if [ "$status" -ne 0 ] || ! grep -q '^result,passed$' "$work/report/summary.csv"; then
  cat "$work/run.out" >&2
  tail -30 "$work/state/backend.log" >&2
  head -20 "$work/report/errors.csv" >&2 2>/dev/null || true
  echo "the run against fcm-django did not pass (exit $status)" >&2
  exit 1
fi
grep -q '^http\.unregister,closed,[1-9]' "$work/report/operations.csv" || { echo "no device departed through DELETE" >&2; exit 1; }

echo "== the fleet again, logged in by session: Django's session and CSRF cookies on every request"
status=0
"$pf" run "$here/scenario-session.yaml" --quiet --out "$work/report-session" >"$work/run-session.out" 2>&1 || status=$?
headline "$work/report-session"
if [ "$status" -ne 0 ] || ! grep -q '^result,passed$' "$work/report-session/summary.csv"; then
  cat "$work/run-session.out" >&2
  tail -30 "$work/state/backend.log" >&2
  echo "the session-login run against fcm-django did not pass (exit $status)" >&2
  exit 1
fi
stop_backend

echo "== fcm-django with a planted bug: a user's last device is left out of every send"
patched="$work/patched"
mkdir -p "$patched"
cp -r "$("$py" -c 'import fcm_django, os; print(os.path.dirname(fcm_django.__file__))')" "$patched/"
export PFFCM_BUG_LOG="$work/dropped.log"
: >"$PFFCM_BUG_LOG"
"$py" - "$patched/fcm_django/models.py" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
anchor = """        registration_ids = self.get_registration_ids(
            skip_registration_id_lookup,
            additional_registration_ids,
        )
        app = SETTINGS["DEFAULT_FIREBASE_APP"] if app is None else app
"""
# The queryset's send_message, the first of fcm_django's models.py.
start = text.find("    def send_message(\n")
at = text.find(anchor, start)
assert start >= 0 and at >= 0 and at < text.find("def asend_message"), "the planted bug's anchor moved: update .ci/interop/fcm/in-namespace.sh"
bug = anchor + """        if len(registration_ids) > 1:
            registration_ids = registration_ids[:-1]
            with open(__import__("os").environ["PFFCM_BUG_LOG"], "a") as log:
                log.write("1\\n")
"""
open(path, "w").write(text[:at] + bug + text[at + len(anchor):])
PY
# Without departures, so that no push the bug drops is to a device leaving at that moment.
grep -v 'departure:' "$here/scenario.yaml" >"$work/bug.yaml"
start_backend "$work/state-bug" "$patched"
status=0
"$pf" run "$work/bug.yaml" --quiet --out "$work/report-bug" >"$work/run-bug.out" 2>&1 || status=$?
headline "$work/report-bug"
"$py" - "$work/report-bug" "$PFFCM_BUG_LOG" "$status" <<'PY'
import csv, sys, os
d, log, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
dropped = sum(int(line) for line in open(log) if line.strip())
s = dict(csv.reader(open(os.path.join(d, "summary.csv"))))
problems = []
if rc != 99: problems.append(f"exit code {rc}, not 99")
if dropped == 0: problems.append("the bug never fired (no send to a user with two devices)")
if int(s["lost"]) != dropped: problems.append(f"lost {s['lost']} != {dropped} pushes dropped")
for key in ("misdelivered", "duplicates", "indeterminate"):
    if int(s[key]): problems.append(f"{key} {s[key]}, not 0")
if int(s["delivered"]) + dropped != int(s["expected"]): problems.append(f"delivered {s['delivered']} + dropped {dropped} != expected {s['expected']}")
print(f"  planted bug: {dropped} pushes dropped; ledger: lost {s['lost']} of {s['expected']} expected, exit {rc}")
if problems:
    print("  the ledger did not catch the planted bug exactly: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
print("  caught exactly")
PY
