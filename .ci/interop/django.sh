# Helpers for the interop scripts that run a Django backend in the background (sourced; they use
# the caller's `pids` array, whose last entry is the backend).

# Waits until GET http://127.0.0.1:$1$2 answers $3 (a view that only takes POST answers 405).
# $4 names the backend, $5 is its log, shown when it never answers.
wait_django() {
  local port=$1 path=$2 want=$3 name=$4 log=$5 code
  for _ in $(seq 1 100); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$path" || true)
    [ "$code" = "$want" ] && return 0
    sleep 0.2
  done
  echo "$name did not start" >&2; cat "$log" >&2; return 1
}

# Stops the last backend started and waits until its port no longer answers.
stop_django() { # $1: port
  kill "${pids[-1]}" 2>/dev/null || true
  wait "${pids[-1]}" 2>/dev/null || true
  for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$1/" || return 0; sleep 0.1; done
}
