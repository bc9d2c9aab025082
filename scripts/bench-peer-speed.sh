#!/usr/bin/env bash
# Times each `augur evaluate --task X` beside the in-repo LightGBM peer
# (scripts/peer-lightgbm.py) on the same trace, in one run, and prints the ratios.
#
#   scripts/bench-peer-speed.sh [--augur BIN] [--tasks runtime,queue-wait,failure] [--runs N] [TRACE ARGS...]
#
# TRACE ARGS are what `augur evaluate` and `augur data export` take to name the trace
# (default: --dataset graham), e.g. `--trace graham.sacct.gz --format sacct --timezone
# America/Toronto`. BIN defaults to $CARGO_TARGET_DIR/debug/augur (else target/debug/augur);
# pass the release binary (`cargo build --release -p augur`, what users run) with --augur.
#
# The trace is exported once (`augur data export`, not timed); then, per task, augur and
# the peer run one after the other, each timed as a whole process (wall seconds: reading
# the trace, features, fits and scoring), so both see the same load. The machine's load
# average is printed before and after: on a shared machine compare the ratios, not the
# seconds. With --runs N (default 1) each task's pair runs N times in turn (augur, peer,
# augur, peer, ...) and the median of the N paired ratios is printed with their range: the
# peer's own time moves by a third from one run to the next on a shared machine, so one
# pair says little. Needs `pip install lightgbm pandas numpy`.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
augur="${CARGO_TARGET_DIR:-$here/../target}/debug/augur"
tasks="runtime,queue-wait,failure"
runs=1
trace=()
while [ $# -gt 0 ]; do
  case "$1" in
    --augur) augur=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) trace+=("$1"); shift ;;
  esac
done
[ ${#trace[@]} -gt 0 ] || trace=(--dataset graham)
[ -x "$augur" ] || { echo "no augur binary at $augur (build it, or pass --augur)" >&2; exit 2; }
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "--runs takes a whole number of runs, got '$runs'" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# `data export` takes the trace as --dataset NAME or as a positional path
export_args=()
for ((i = 0; i < ${#trace[@]}; i++)); do
  case "${trace[$i]}" in
    --trace) export_args+=("${trace[$((i + 1))]}"); i=$((i + 1)) ;;
    *) export_args+=("${trace[$i]}") ;;
  esac
done
"$augur" data export --csv "$tmp/jobs.csv" "${export_args[@]}" >/dev/null

wall() { # wall seconds of a command, its output to $1
  local out=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$out" 2>"$out.err" || { echo "failed: $*" >&2; tail -5 "$out.err" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

median() { # the median of the numbers on stdin (the mean of the middle two for an even count)
  sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "trace: ${trace[*]}   augur: $augur   cores: $(nproc)   runs per task: $runs"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %10s %10s %8s %15s\n' task augur_s peer_s ratio "ratio min-max"
for task in ${tasks//,/ }; do
  as=() ps=() rs=()
  for ((r = 0; r < runs; r++)); do
    a=$(wall "$tmp/augur-$task" "$augur" evaluate --task "$task" "${trace[@]}" --json --no-report)
    p=$(wall "$tmp/peer-$task" python3 "$here/peer-lightgbm.py" "$tmp/jobs.csv" --tasks "$task" --json)
    as+=("$a") ps+=("$p") rs+=("$(echo "$a / $p" | bc -l)")
  done
  lo=$(printf '%s\n' "${rs[@]}" | sort -g | head -1)
  hi=$(printf '%s\n' "${rs[@]}" | sort -g | tail -1)
  printf '%-12s %10.1f %10.1f %8.2f %7.2f-%-7.2f\n' "$task" \
    "$(printf '%s\n' "${as[@]}" | median)" "$(printf '%s\n' "${ps[@]}" | median)" \
    "$(printf '%s\n' "${rs[@]}" | median)" "$lo" "$hi"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
