#!/usr/bin/env bash
# Captures the real `sacct` fixtures of datasets/tests/fixtures/sacct/ from a throw-away
# single-node Slurm (scripts/slurm-test-cluster.sh): submits a fixed set of jobs, saves one
# snapshot while some run and others wait, and one after all have ended. Takes about 2 minutes
# (the 1-minute time limit is enforced on slurmctld's 30-second check).
#
#   scripts/capture-sacct-fixtures.sh OUT_DIR
#
# Writes OUT_DIR/running.txt (mid-run), OUT_DIR/finished.txt (all ended, times in UTC) and
# OUT_DIR/finished-new-york.txt (the same jobs, printed by sacct in America/New_York).
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/augur-slurm.XXXXXX)
trap '"$here/slurm-test-cluster.sh" stop "$work"; rm -rf "$work"' EXIT

# The field list the sacct reader's module doc recommends.
fields=JobID,JobIDRaw,JobName,User,Account,Partition,QOS,Priority,Submit,Eligible,Start,End,Elapsed,Timelimit,State,NNodes,NCPUS,ReqTRES,AllocTRES,Cluster

"$here/slurm-test-cluster.sh" start "$work"
eval "$("$here/slurm-test-cluster.sh" env "$work")"
cd "$work"

id() { sbatch --parsable "$@" | cut -d';' -f1; }
sacct_all() { sacct -P -a -S 2000-01-01 -E now --format="$fields"; }

# Both CPUs busy for 20 s: everything after it waits for resources.
id -J hold-cpus -n 2 -t 5 --wrap "sleep 20" >/dev/null
id -J wait-short -n 1 -t 2 --wrap "sleep 5" >/dev/null
id -J wait-days -n 2 -t 1-00:00:00 --wrap "sleep 3" >/dev/null
cancel_pending=$(id -J cancel-pending -n 2 --wrap "sleep 60")
fail=$(id -J fail-exit3 -n 1 --wrap "exit 3")
id -J after-fail -d "afterany:$fail" -n 1 -t 10 --wrap "sleep 1" >/dev/null
id -J gpu-typed -n 1 --gres=gpu:tesla:2 -t 3 --wrap "sleep 4" >/dev/null
id -J gpu-any -n 1 --gpus=1 -t 0:30 --wrap "sleep 2" >/dev/null
id -J array -a 1-4%2 -n 1 -t 2 --wrap "sleep 3" >/dev/null
id -J timeout -n 1 -t 1 --wrap "sleep 300" >/dev/null
cancel_running=$(id -J cancel-running -n 1 -t 5 --wrap "sleep 120")
# A heterogeneous job: its two components cannot share the one node, so it waits until
# cancelled at the end.
cat >"$work/het.sh" <<'EOF'
#!/bin/bash
#SBATCH -J het -n 1 -t 3
#SBATCH hetjob
#SBATCH -n 1 -t 2
sleep 2
EOF
het=$(id "$work/het.sh")

sleep 5
scancel "$cancel_pending"
sleep 3
sacct_all >"$out/running.txt"

# Cancel the running one once it runs, then wait for everything but the het job to end.
for _ in $(seq 1 120); do
  state=$(squeue -h -j "$cancel_running" -o %T 2>/dev/null || true)
  if [ "$state" = RUNNING ]; then
    sleep 2
    scancel "$cancel_running"
    break
  fi
  sleep 1
done
for _ in $(seq 1 240); do
  left=$(squeue -h -o %i | { grep -cv "^$het+" || true; })
  [ "$left" -eq 0 ] && break
  sleep 1
done
scancel "$het"
sleep 3
sacct_all >"$out/finished.txt"
TZ=America/New_York sacct_all >"$out/finished-new-york.txt"
echo "captured into $out"
