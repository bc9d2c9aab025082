#!/usr/bin/env bash
# Times the first start of `augur serve` in a fresh data folder: seconds (and the process's
# CPU seconds) to `/readyz` 200, then to every kind trained.
#
#   scripts/bench-first-start.sh [--augur BIN] [--dataset graham] [--port 18931] [SERVE ARGS...]
#
# BIN defaults to $CARGO_TARGET_DIR/release/augur (else target/release/augur); SERVE ARGS
# are passed on (e.g. --trees 50). The service runs `--backend none --bootstrap DATASET` in
# a temporary data folder, removed after. "Every kind trained" is `/readyz`'s `training` list
# empty; a binary whose `/readyz` has no such list (before it existed: ready only once the
# history kinds were trained) counts the bundled kinds' lines in its log instead. CPU
# seconds are user + system of the process (/proc/PID/stat). The load average is printed
# before and after: on a shared machine it says how much to trust the seconds.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
augur="${CARGO_TARGET_DIR:-$here/../target}/release/augur"
dataset=graham
port=18931
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --augur) augur=$2; shift 2 ;;
    --dataset) dataset=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
[ -x "$augur" ] || { echo "no augur binary at $augur (cargo build --release -p augur, or pass --augur)" >&2; exit 2; }
command -v curl >/dev/null || { echo "needs curl" >&2; exit 2; }

tmp=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

tick=$(getconf CLK_TCK)
cpu_s() { # user + system CPU seconds of $pid
  awk -v t="$tick" '{ sub(/^.*\) /, ""); printf "%.1f", ($12 + $13) / t }' "/proc/$pid/stat"
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

echo "binary: $augur"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(now)
"$augur" serve --backend none --bootstrap "$dataset" --addr "127.0.0.1:$port" \
  --data-dir "$tmp/data" "${extra[@]}" >"$tmp/out.log" 2>"$tmp/err.log" &
pid=$!

ready_s= ready_cpu= body=
while kill -0 "$pid" 2>/dev/null; do
  code=$(curl -s -o "$tmp/ready.json" -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)
  if [ "$code" = 200 ]; then
    ready_s=$(since "$start"); ready_cpu=$(cpu_s); body=$(cat "$tmp/ready.json")
    break
  fi
  sleep 0.2
done
[ -n "$ready_s" ] || { echo "augur serve exited before it was ready:" >&2; cat "$tmp/err.log" >&2; exit 1; }
echo "/readyz 200 after ${ready_s} s (process CPU ${ready_cpu} s): $body"

all_trained() {
  curl -s -o "$tmp/ready.json" "http://127.0.0.1:$port/readyz" || return 1
  if grep -q '"training"' "$tmp/ready.json"; then
    grep -q '"training":\[\]' "$tmp/ready.json"
  else
    [ "$(grep -cE '(convergence|dag) model v[0-9]+ trained|not trained: (convergence|dag)|training the (convergence|dag) model failed' "$tmp/err.log")" -ge 2 ]
  fi
}
while kill -0 "$pid" 2>/dev/null && ! all_trained; do sleep 0.2; done
kill -0 "$pid" 2>/dev/null || { echo "augur serve exited:" >&2; cat "$tmp/err.log" >&2; exit 1; }
echo "every kind trained after $(since "$start") s (process CPU $(cpu_s) s): $(cat "$tmp/ready.json")"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "--- its log:"
grep -E 'trained|not trained|failed|ERROR' "$tmp/err.log" || true
