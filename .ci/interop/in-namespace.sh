#!/usr/bin/env bash
# Runs inside fresh network and mount namespaces (see .ci/interop-tls): its own loopback, and
# an /etc/hosts of its own that sends Apple's, Google's, Mozilla's and Microsoft's push hosts to
# the mock push service.
# Nothing here reaches outside the namespace.
set -euo pipefail
pf=$1 venv=$2 work=$3 here=$4
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

ip link set lo up
cp /etc/hosts "$work/hosts"
echo "127.0.0.1 api.push.apple.com api.sandbox.push.apple.com api.development.push.apple.com fcm.googleapis.com oauth2.googleapis.com login.live.com" >>"$work/hosts"
echo "127.0.0.1 updates.push.services.mozilla.com web.push.apple.com wns2-pf.notify.windows.com" >>"$work/hosts"
mount --bind "$work/hosts" /etc/hosts

# Credentials as Apple and Google hand them out: an ES256 .p8 key, a service-account JSON.
openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out "$work/AuthKey_INTEROP001.p8"
bash "$here/service-account.sh" "$work" pushfleet-interop "$venv/bin/python"

echo "== mock push service with TLS on :443 (keys verified)"
"$pf" serve --backend-listen 127.0.0.1:8080 --pns-listen 127.0.0.1:8090 --pns-tls-listen 127.0.0.1:443 \
  --tls-ca-out "$work/ca.pem" --apns-key "INTEROP001:TEAMINTROP=$work/AuthKey_INTEROP001.p8" \
  --apns-topics com.example.interop --fcm-service-account "$work/service-account.json" --log-level warning \
  >"$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q "^device gateway" "$work/serve.log" && break; sleep 0.2; done
cat "$work/serve.log"
bundle=$(sed -n 's/^CA bundle (system CAs + this CA): //p' "$work/serve.log")
test -s "$bundle" || { echo "serve printed no CA bundle" >&2; exit 1; }

echo "== curl --http2 and openssl s_client -alpn h2 with the printed CA"
version=$(curl -sS --http2 --cacert "$work/ca.pem" -o /dev/null -w '%{http_version}' https://api.push.apple.com/health)
test "$version" = 2 || { echo "curl did not speak HTTP/2 over TLS: $version" >&2; exit 1; }
reason=$(curl -sS --http2 --cacert "$work/ca.pem" -X POST -d '{}' https://api.push.apple.com/3/device/0011223344556677)
echo "$reason" | grep -q MissingProviderToken || { echo "unexpected APNs answer: $reason" >&2; exit 1; }
handshake=$(echo | timeout 10 openssl s_client -alpn h2 -CAfile "$work/ca.pem" -connect 127.0.0.1:443 -servername fcm.googleapis.com 2>&1)
echo "$handshake" | grep -q "ALPN protocol: h2" || { echo "openssl negotiated no h2" >&2; exit 1; }
echo "$handshake" | grep -q "Verify return code: 0 (ok)" || { echo "openssl did not verify the chain" >&2; exit 1; }
echo "curl: HTTP/2 over TLS; openssl: ALPN h2, chain verified"

echo "== backend using aioapns and firebase-admin, trusting the CA through the usual variables"
SSL_CERT_FILE="$bundle" REQUESTS_CA_BUNDLE="$bundle" "$venv/bin/python" "$here/backend.py" --listen-port 8081 \
  --apns-key "$work/AuthKey_INTEROP001.p8" --apns-key-id INTEROP001 --apns-team-id TEAMINTROP \
  --apns-topic com.example.interop --service-account "$work/service-account.json" >"$work/backend.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:8081/health >/dev/null 2>&1 && break; sleep 0.2; done

echo "== the fleet: devices on the mock's gateway, sends through the Python backend"
status=0
"$pf" run "$here/scenario.yaml" --out "$work/report" || status=$?
echo "backend sent: $(curl -s http://127.0.0.1:8081/stats)"
if [ "$status" -ne 0 ]; then
  echo "interop run failed (exit $status)" >&2
  tail -20 "$work/backend.log" >&2
  cat "$work/report/errors.csv" >&2 2>/dev/null || true
  exit 1
fi
grep -E '^(result|sends|expected|delivered|misdelivered|lost),' "$work/report/summary.csv"
stats=$(curl -s http://127.0.0.1:8081/stats)
"$venv/bin/python" -c 'import json,sys; s=json.loads(sys.argv[1]); sys.exit(0 if all(s[p] > 0 for p in ("apns", "fcm", "wns", "webpush")) and not s["failed"] else 1)' "$stats" \
  || { echo "the backend did not send on every platform: $stats" >&2; exit 1; }
grep -q '^result,passed$' "$work/report/summary.csv"

# Two more HTTP/2 stacks: Node's own http2 (what node-apn and apns2 use) and Java's HttpClient,
# each trusting the CA its runtime's way, each sending to a device on the gateway that must get
# every push. Skipped, and said so, where the runtime is not installed.
probe() { # $1: name, $2: device token, $3: count, then the command
  local name=$1 token=$2 count=$3; shift 3
  rm -f "$work/$name.ready"
  "$venv/bin/python" "$here/runtimes/device.py" "ws://127.0.0.1:8090/device?platform=apns&token=$token" \
    "runtime probe $name" "$count" 20 "$work/$name.ready" >"$work/$name.seen" &
  local device=$!
  for _ in $(seq 1 100); do [ -e "$work/$name.ready" ] && break; sleep 0.1; done
  "$@" || { echo "$name: the client failed" >&2; kill "$device" 2>/dev/null; exit 1; }
  wait "$device"
  local seen; seen=$(cat "$work/$name.seen")
  echo "$name: the device received $seen/$count"
  [ "$seen" = "$count" ] || { echo "$name: the device missed pushes" >&2; exit 1; }
}
key="$work/AuthKey_INTEROP001.p8"
if command -v node >/dev/null 2>&1; then
  echo "== Node http2 client, APNs token auth over TLS"
  probe node "$(printf 'a1%.0s' $(seq 1 32))" 40 \
    env NODE_EXTRA_CA_CERTS="$work/ca.pem" node "$here/runtimes/apns-node.js" "$key" INTEROP001 TEAMINTROP com.example.interop "$(printf 'a1%.0s' $(seq 1 32))" 40
else
  echo "== Node not installed: its http2 probe skipped"
fi
if command -v java >/dev/null 2>&1 && command -v keytool >/dev/null 2>&1; then
  echo "== Java HttpClient over HTTP/2, APNs token auth over TLS"
  keytool -importcert -noprompt -alias pushfleet -file "$work/ca.pem" -keystore "$work/trust.p12" \
    -storepass interop -storetype PKCS12 >/dev/null 2>&1
  probe java "$(printf 'b2%.0s' $(seq 1 32))" 40 \
    java -Djavax.net.ssl.trustStore="$work/trust.p12" -Djavax.net.ssl.trustStorePassword=interop \
      "$here/runtimes/APNsJava.java" "$key" INTEROP001 TEAMINTROP com.example.interop "$(printf 'b2%.0s' $(seq 1 32))" 40
else
  echo "== Java not installed: its HttpClient probe skipped"
fi

# Web Push: pywebpush sends to browsers subscribed at each service's host (Chrome's FCM, Firefox's
# Mozilla, Edge's WNS, Safari's Apple), which decrypt with http_ece.
echo "== pywebpush to browsers on the gateway, VAPID over TLS by hosts entries"
REQUESTS_CA_BUNDLE="$bundle" "$venv/bin/python" "$here/webpush_browsers.py" ws://127.0.0.1:8090 5 10
