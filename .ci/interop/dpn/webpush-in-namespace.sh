#!/usr/bin/env bash
# Runs inside fresh network and mount namespaces (see .ci/interop-backends): its own loopback, and
# an /etc/hosts of its own that sends the Web Push services' hosts to the mock push service, whose
# CA pywebpush trusts through REQUESTS_CA_BUNDLE. Nothing here reaches outside the namespace.
# The fleet of browsers and Windows devices against django-push-notifications must pass; then,
# against a copy whose WebPushDevice encrypts the pushes of every third user (user3, user6, …) with a
# wrong auth secret, it must fail
# with exactly those pushes counted undecryptable and lost.
set -euo pipefail
pf=$1 venv=$2 work=$3 here=$4
py="$venv/bin/python"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
source "$here/../django.sh"

ip link set lo up
cp /etc/hosts "$work/hosts"
echo "127.0.0.1 fcm.googleapis.com updates.push.services.mozilla.com wns2-pf.notify.windows.com web.push.apple.com" >>"$work/hosts"
mount --bind "$work/hosts" /etc/hosts

"$pf" serve --backend-listen 127.0.0.1:8080 --pns-listen 127.0.0.1:8090 --pns-tls-listen 127.0.0.1:443 \
  --tls-ca-out "$work/ca.pem" --log-level warning >"$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q "^device gateway" "$work/serve.log" && break; sleep 0.2; done
bundle=$(sed -n 's/^CA bundle (system CAs + this CA): //p' "$work/serve.log")
test -s "$bundle" || { cat "$work/serve.log" >&2; echo "serve printed no CA bundle" >&2; exit 1; }
export REQUESTS_CA_BUNDLE="$bundle" SSL_CERT_FILE="$bundle"

# The application server's VAPID key pair, made as py_vapid (pywebpush's own) makes it.
"$py" - "$work/vapid.pem" "$work/vapid.pub" <<'PY'
import sys, base64
from py_vapid import Vapid01
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
vapid = Vapid01()
vapid.generate_keys()
vapid.save_key(sys.argv[1])
point = vapid.public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
open(sys.argv[2], "w").write(base64.urlsafe_b64encode(point).decode().rstrip("="))
PY
export PFDPN_WP_PRIVATE_KEY="$work/vapid.pem" PFDPN_WNS_ACCESS_URL="http://127.0.0.1:8090/accesstoken.srf"
sed -e "s|@VAPID_PUBLIC_KEY@|$(cat "$work/vapid.pub")|" "$here/webpush-scenario.yaml" >"$work/scenario.yaml"

start_backend() { # $1: state folder, $2: extra PYTHONPATH (a patched copy)
  export PFDPN_STATE=$1 PYTHONPATH="${2:+$2:}$here" DJANGO_SETTINGS_MODULE=pfdpn.settings
  mkdir -p "$PFDPN_STATE"
  "$py" -m django migrate -v 0
  "$py" -m django shell -v 0 -c "
from django.contrib.auth.models import User
for i in range(1, 21):
    User.objects.create_user(f'user{i}', password=f'user{i}')
"
  "$py" -m django runserver 127.0.0.1:8084 --noreload >"$PFDPN_STATE/backend.log" 2>&1 &
  pids+=($!)
  wait_django 8084 /api-token-auth/ 405 django-push-notifications "$PFDPN_STATE/backend.log"
}

stop_backend() { stop_django 8084; }

headline() {
  "$py" - "$1" <<'PY'
import csv, sys, os
d = sys.argv[1]
s = dict(csv.reader(open(os.path.join(d, "summary.csv"))))
ops = {(r["operation"], r["measure"]): r for r in csv.DictReader(open(os.path.join(d, "operations.csv")))}
sub = ops.get(("webpush.subscribe", "closed"), {})
print("  result %s: sends %s, expected %s, delivered %s, lost %s, misdelivered %s, undecryptable %s; %s browsers subscribed"
      % (s["result"], s["sends"], s["expected"], s["delivered"], s["lost"], s["misdelivered"], s.get("undecryptable", "?"), sub.get("count", "0")))
PY
}

echo "== django-push-notifications $("$py" -c 'import importlib.metadata as m; print(m.version("django-push-notifications"))') WebPushDevice with pywebpush $("$py" -c 'import importlib.metadata as m; print(m.version("pywebpush"))') (browsers and WNS, https endpoints by hosts entries)"
start_backend "$work/state" ""
status=0
"$pf" run "$work/scenario.yaml" --quiet --out "$work/report" >"$work/run.out" 2>&1 || status=$?
headline "$work/report"
if [ "$status" -ne 0 ] || ! grep -q '^result,passed$' "$work/report/summary.csv"; then
  cat "$work/run.out" >&2; tail -30 "$work/state/backend.log" >&2
  echo "the run against django-push-notifications' WebPushDevice did not pass" >&2
  exit 1
fi
"$py" - "$work/report" <<'PY'
import csv, sys, os, json
run = json.load(open(os.path.join(sys.argv[1], "run.json")))
browsers = run["deliveryByPlatform"].get("webpush", {})
if not browsers.get("expected") or browsers["delivered"] != browsers["expected"]:
    sys.exit(f"browsers: {browsers}")
print(f"  browsers: expected {browsers['expected']}, delivered {browsers['delivered']}, every payload decrypted")
PY
stop_backend

echo "== with a planted bug: every third user's browsers are sent pushes encrypted with a wrong auth secret"
patched="$work/patched"
mkdir -p "$patched"
cp -r "$("$py" -c 'import push_notifications, os; print(os.path.dirname(push_notifications.__file__))')" "$patched/"
export PFDPN_BUG_LOG="$work/wrong-keys.log"
: >"$PFDPN_BUG_LOG"
"$py" - "$patched/push_notifications/webpush.py" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
anchor = '''		device.p256dh,
	)
'''
assert anchor in text, "the planted bug's anchor moved: update .ci/interop/dpn/webpush-in-namespace.sh"
bug = anchor + '''	if device.user is not None and int(device.user.username[4:]) % 3 == 0:
		subscription_info["keys"]["auth"] = "AAAAAAAAAAAAAAAAAAAAAA"
		with open(__import__("os").environ["PFDPN_BUG_LOG"], "a") as log:
			log.write("1\\n")
'''
open(path, "w").write(text.replace(anchor, bug, 1))
PY
start_backend "$work/state-bug" "$patched"
status=0
"$pf" run "$work/scenario.yaml" --quiet --out "$work/report-bug" >"$work/run-bug.out" 2>&1 || status=$?
headline "$work/report-bug"
"$py" - "$work/report-bug" "$PFDPN_BUG_LOG" "$status" <<'PY'
import csv, sys, os
d, log, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
wrong = sum(1 for line in open(log) if line.strip())
s = dict(csv.reader(open(os.path.join(d, "summary.csv"))))
users = {r["user"]: r for r in csv.DictReader(open(os.path.join(d, "users.csv")))}
problems = []
if rc != 99: problems.append(f"exit code {rc}, not 99")
if wrong == 0: problems.append("the bug never fired (no push to the browsers of every third user)")
if int(s["undecryptable"]) != wrong: problems.append(f"undecryptable {s['undecryptable']} != {wrong} pushes with the wrong secret")
if int(s["lost"]) != wrong: problems.append(f"lost {s['lost']} != {wrong}")
hit = sum(int(u["undecryptable"]) for name, u in users.items() if int(name[4:]) % 3 == 0)
if hit != wrong: problems.append(f"every third user's undecryptable {hit} != {wrong}")
others = [name for name, u in users.items() if int(name[4:]) % 3 and (int(u["undecryptable"]) or int(u["lost"]))]
if others: problems.append(f"other users with losses: {others}")
if int(s["misdelivered"]) or int(s["duplicates"]): problems.append(f"misdelivered {s['misdelivered']}, duplicates {s['duplicates']}")
print(f"  planted bug: {wrong} pushes encrypted with a wrong secret; ledger: undecryptable {s['undecryptable']}, lost {s['lost']}, exit {rc}")
if problems:
    sys.exit("  the ledger did not catch the planted bug exactly: " + "; ".join(problems))
print("  caught exactly")
PY
