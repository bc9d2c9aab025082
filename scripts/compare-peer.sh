#!/usr/bin/env bash
# Augur beside the in-repo LightGBM peer (scripts/peer-lightgbm.py) in one run, on the same
# jobs and time-ordered 80/20 split: for each trace, `augur evaluate --json` per task and the
# peer on `augur data export`'s job table, each timed (wall seconds, features included).
#
#   pip install lightgbm pandas numpy      # once, for the peer
#   cargo build -p augur                   # or set AUGUR=/path/to/augur
#   scripts/compare-peer.sh [OUT_DIR] [TRACES...]    # default: graham mira itp philly
#
# Writes OUT_DIR/<trace>-<task>.json (augur), OUT_DIR/<trace>-peer.json and prints the
# summary table (scripts/compare-peer-summary.py OUT_DIR prints it again).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
AUGUR=${AUGUR:-${CARGO_TARGET_DIR:-$here/../target}/debug/augur}
out=${1:-compare-peer}
shift || true
traces=("$@")
[ ${#traces[@]} -gt 0 ] || traces=(graham mira itp philly)
mkdir -p "$out"
now() { date +%s.%N; }
for t in "${traces[@]}"; do
  for task in runtime queue-wait failure; do
    t0=$(now)
    if "$AUGUR" evaluate --dataset "$t" --task "$task" --json --no-report \
        >"$out/$t-$task.json" 2>"$out/$t-$task.log"; then
      awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "{\"seconds\": %.1f}\n", b - a }' >"$out/$t-$task.time.json"
    else
      echo "augur evaluate --task $task on $t failed (see $out/$t-$task.log)" >&2
      rm -f "$out/$t-$task.json"
    fi
  done
  "$AUGUR" data export --dataset "$t" --csv "$out/$t.csv" 2>>"$out/$t-peer.log"
  python3 "$here/peer-lightgbm.py" "$out/$t.csv" --json >"$out/$t-peer.json" 2>>"$out/$t-peer.log"
  rm -f "$out/$t.csv"
done
python3 "$here/compare-peer-summary.py" "$out"
