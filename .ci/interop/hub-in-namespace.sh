#!/usr/bin/env bash
# Runs inside fresh network and mount namespaces (see .ci/interop-hub): its own loopback, and an
# /etc/hosts of its own that sends the hub's namespace and a WNS host to the mock push service,
# so a client that keeps Endpoint=sb://{namespace}.servicebus.windows.net/ reaches it over TLS on
# :443 with the mock's CA trusted. Nothing here reaches outside the namespace.
set -euo pipefail
pf=$1 venv=$2 work=$3 here=$4
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

ip link set lo up
cp /etc/hosts "$work/hosts"
echo "127.0.0.1 pushfleet.servicebus.windows.net db5.notify.windows.com" >>"$work/hosts"
mount --bind "$work/hosts" /etc/hosts

echo "== serve with TLS on :443, its default certificate"
"$pf" serve --backend-listen 127.0.0.1:8080 --pns-listen 127.0.0.1:8090 --pns-tls-listen 127.0.0.1:443 \
  --tls-ca-out "$work/ca.pem" --log-level warning >"$work/serve-tls.log" 2>&1 &
serve=$!
pids+=($serve)
for _ in $(seq 1 150); do grep -q "^hub listen-only connection string" "$work/serve-tls.log" && break; sleep 0.2; done
grep -E "^(  Hub   hosts:|hub name:|hub connection string:)" "$work/serve-tls.log" | sed 's/SharedAccessKey=.*/SharedAccessKey=…/'
grep -q "^  Hub   hosts: 127.0.0.1 pushfleet.servicebus.windows.net" "$work/serve-tls.log" \
  || { echo "serve printed no hosts line for the hub" >&2; cat "$work/serve-tls.log" >&2; exit 1; }
bundle=$(sed -n 's/^CA bundle (system CAs + this CA): //p' "$work/serve-tls.log")
connection=$(sed -n 's/^hub connection string: //p' "$work/serve-tls.log")
hub=$(sed -n 's/^hub name: //p' "$work/serve-tls.log")

echo "== notificationhubs-rest-python and REST requests as Microsoft's reference shows them"
REQUESTS_CA_BUNDLE="$bundle" SSL_CERT_FILE="$bundle" timeout 120 "$venv/bin/python" "$here/hub_rest_python.py" \
  --connection-string "$connection" --hub-name "$hub" --pns http://127.0.0.1:8090 --wns-host db5.notify.windows.com

echo "== stopping serve while hub sends fan out (every push throttled and retried)"
curl -sf -X PUT -H "Authorization: Bearer $(sed -n 's/^push admin token: \([0-9a-f]*\).*/\1/p' "$work/serve-tls.log")" \
  -d '{"throttle":1}' http://127.0.0.1:8090/admin/faults >/dev/null
REQUESTS_CA_BUNDLE="$bundle" "$venv/bin/python" "$here/hub_rest_python.py" --connection-string "$connection" --hub-name "$hub" \
  --pns http://127.0.0.1:8090 --wns-host db5.notify.windows.com --load "$work/load.ready" &
load=$!
for _ in $(seq 1 300); do [ -e "$work/load.ready" ] && break; sleep 0.1; done
sleep 2
start=$(date +%s%N)
kill -TERM "$serve"
wait "$serve" || true
took=$(( ($(date +%s%N) - start) / 1000000 ))
wait "$load" 2>/dev/null || true
echo "serve stopped ${took} ms after SIGTERM with sends in flight"
[ "$took" -lt 2000 ] || { echo "stopping under load took ${took} ms" >&2; exit 1; }
grep -iE "fatal|panic|crash" "$work/serve-tls.log" && { echo "serve did not stop cleanly" >&2; exit 1; }
echo "hub interop over TLS by host name passed"
